"""`cancel_run RUN_ID [--reason TEXT]`: cancel a run as an operator (RUN-7), with an audit row."""

from django.core.management.base import CommandError

from scheduler.management.cli import SchedulerCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(SchedulerCommand):
    help = "Cancel a run: a queued run at once, an active one at its runner's next heartbeat. Recorded in operator_actions."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--reason", default=None, help="why (kept in the audit row)")

    def handle(self, *args, **options):
        repair = repairs.cancel_run(options["run_id"], command_actor(), options["reason"])
        if not repair.changed:
            raise CommandError(repair.line())
        self.stdout.write(repair.line())
