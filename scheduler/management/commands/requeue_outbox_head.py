"""`requeue_outbox_head EVENT_ID [--reason TEXT]`: make a failed head deliverable again (OBX-2), with an audit row."""

from django.core.management.base import CommandError

from scheduler.management.cli import SchedulerCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(SchedulerCommand):
    help = "Requeue a failed outbox head so its run's lane delivers again. Recorded in operator_actions."

    def add_arguments(self, parser):
        parser.add_argument("event_id")
        parser.add_argument("--reason", default=None, help="why (kept in the audit row)")

    def handle(self, *args, **options):
        repair = repairs.requeue_outbox_head(options["event_id"], command_actor(), options["reason"])
        if not repair.changed:
            raise CommandError(repair.line())
        self.stdout.write(repair.line())
