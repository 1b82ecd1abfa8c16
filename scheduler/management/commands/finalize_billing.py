"""`finalize_billing [--once] [--limit N] [--interval S]` (BIL-1)."""

import logging

from scheduler.cleanup import billing_sweep
from scheduler.loop import lease_owner
from scheduler.management.cli import LoopCommand, integer


class Command(LoopCommand):
    help = "Turn terminal runs' runtime resources into billing items."
    loop_name = "billing"
    default_interval = 5.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=integer(1), default=20, help="billing jobs per tick")

    def handle(self, *args, **options):
        owner = lease_owner()
        self.run_loop(lambda: billing_sweep.run_once(owner, options["limit"]).as_tick(options["limit"]), options,
                      logging.getLogger("scheduler.sweep.billing"))
