"""`run_wait_timers [--once] [--limit N] [--interval S]` (WAIT-4): resume the runs whose wait deadline passed."""

import logging

from scheduler.management.cli import LoopCommand, integer
from scheduler.waits import wakeups


class Command(LoopCommand):
    help = "Queue again the durably waiting runs whose deadline passed (sleeps ended, event waits timed out)."
    loop_name = "wait-timers"
    # An upper bound: an idle tick sleeps until the next deadline, and never longer than this (a wait suspended
    # meanwhile with a nearer deadline is resumed at most this late).
    default_interval = 1.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=integer(1), default=wakeups.DEFAULT_WAKE_LIMIT, help="runs resumed per tick")

    def handle(self, *args, **options):
        self.run_loop(lambda: wakeups.wake_due(options["limit"]), options, logging.getLogger("scheduler.waits"))
