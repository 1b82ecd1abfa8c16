"""`requeue_outbox_head EVENT_ID [--reason TEXT]`: make a failed head deliverable again (OBX-2), with an audit row."""

from scheduler.management.cli import RepairCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(RepairCommand):
    help = "Requeue a failed outbox head so its run's lane delivers again. Recorded in operator_actions."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("event_id")

    def handle(self, *args, **options):
        repair = repairs.requeue_outbox_head(options["event_id"], command_actor(), options["reason"])
        self.report(repair)
