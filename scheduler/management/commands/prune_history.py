"""`prune_history [--once] [--batch N] [--older-than-days N] [--interval S]` (RET-1..4): delete whole finished runs
past retention whose obligations are met, and billing items past theirs."""

import logging

from scheduler.history import pruning
from scheduler.management.cli import LoopCommand, integer


class Command(LoopCommand):
    help = ("Prune finished runs past SCHEDULER_RETENTION_DAYS whose facts are delivered, sandboxes deleted and "
            "billing finalized, each with every row of its own; and billing items past SCHEDULER_BILLING_RETENTION_DAYS.")
    loop_name = "prune"
    default_interval = 60.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--batch", type=integer(1, 10_000), default=pruning.DEFAULT_BATCH,
                            help="the most runs (and billing items) one statement takes; fewer when that many would take "
                                 "longer than 20 ms")
        parser.add_argument("--older-than-days", type=integer(0), default=None,
                            help="for this run only, prune runs finished more than N days ago (0: every finished "
                                 "run whose obligations are met)")

    def handle(self, *args, **options):
        retention = pruning.Retention.configured(options["older_than_days"])
        pruner = pruning.Pruner(options["batch"], retention)
        self.run_loop(pruner.tick, options, logging.getLogger("scheduler.prune"))
