"""`run_schedules [--once] [--limit N] [--interval S]` (SCD-2): fire due schedule slots, each exactly once."""

import logging

from scheduler.management.cli import LoopCommand, integer
from scheduler.periodic import firing


class Command(LoopCommand):
    help = "Fire the due slots of cron schedules, each once, launching their runs (SCD-2..5)."
    loop_name = "schedules"
    # An upper bound: an idle tick sleeps until the next slot falls due, and never longer than this (a schedule
    # added meanwhile waits at most this long past its first slot).
    default_interval = 30.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=integer(1), default=100, help="slots fired per tick")

    def handle(self, *args, **options):
        self.run_loop(lambda: firing.run_once(options["limit"]), options, logging.getLogger("scheduler.schedules"))
