"""`end_wait RUN_ID [--reason TEXT]` (WAIT-7): end a run's durable wait now, as an operator, with an audit row."""

from scheduler.management.cli import RepairCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(RepairCommand):
    help = "End a run's durable wait now: it resumes in a new sandbox and its wait answers the timeout marker."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("run_id")

    def handle(self, *args, **options):
        self.report(repairs.end_wait(options["run_id"], command_actor(), options["reason"]))
