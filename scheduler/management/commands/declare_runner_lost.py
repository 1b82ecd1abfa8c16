"""`declare_runner_lost RUN_ID [--reason TEXT]`: the sweep's fenced runner_lost verdict on an operator's word."""

from scheduler.management.cli import RepairCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(RepairCommand):
    help = ("Settle a parked run's attempt as runner_lost through the sweep's own fences (a heartbeat, a result or a "
            "cancel in the meantime wins). Recorded in operator_actions.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("run_id")

    def handle(self, *args, **options):
        repair = repairs.declare_runner_lost(options["run_id"], command_actor(), options["reason"])
        self.report(repair)
