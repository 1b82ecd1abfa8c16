"""`dispatch_runs [--once] [--limit N] [--interval S]`: claim queued runs, start their sandboxes, park them."""

import logging

from scheduler.conf import scheduler_settings
from scheduler.management.cli import LoopCommand, integer
from scheduler.runs import dispatch


class Command(LoopCommand):
    help = "Claim queued runs (RUN-2), start each in its sandbox and park it (RUN-3)."
    loop_name = "dispatch"

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=integer(1), default=10, help="claims per tick")

    def handle(self, *args, **options):
        self.run_loop(lambda: dispatch.run_once(options["limit"]).as_tick(options["limit"]), options,
                      logging.getLogger("scheduler.dispatch"), wake_channel=f"{scheduler_settings.schema}_run_queued")
