"""`run_sandbox_cleanup [--once] [--providers daytona,modal,local] [--limit N] [--interval S]` (CLN-1..7)."""

import logging

from scheduler.cleanup import sandbox_sweep
from scheduler.kinds import Provider, values
from scheduler.loop import lease_owner
from scheduler.management.cli import LoopCommand, integer, subset


class Command(LoopCommand):
    help = "Delete the sandboxes of cleanup obligations, confirm the deletes, adopt legacy rows (CLN-1..7)."
    loop_name = "cleanup"
    default_interval = 2.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--providers", type=subset(values(Provider)), default=list(values(Provider)),
                            help="comma-separated providers to clean")
        parser.add_argument("--limit", type=integer(1), default=20, help="obligations per tick")

    def handle(self, *args, **options):
        owner = lease_owner()
        self.run_loop(lambda: sandbox_sweep.run_once(options["providers"], owner, options["limit"]).as_tick(options["limit"]), options,
                      logging.getLogger("scheduler.sweep.cleanup"))
