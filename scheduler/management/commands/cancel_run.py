"""`cancel_run RUN_ID [--reason TEXT]`: cancel a run as an operator (RUN-7), with an audit row."""

from scheduler.management.cli import RepairCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(RepairCommand):
    help = "Cancel a run: a queued run at once, an active one at its runner's next heartbeat. Recorded in operator_actions."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("run_id")

    def handle(self, *args, **options):
        repair = repairs.cancel_run(options["run_id"], command_actor(), options["reason"])
        self.report(repair)
