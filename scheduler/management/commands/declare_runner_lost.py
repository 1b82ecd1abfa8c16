"""`declare_runner_lost RUN_ID [--reason TEXT]`: the sweep's fenced runner_lost verdict on an operator's word."""

from django.core.management.base import CommandError

from scheduler.management.cli import SchedulerCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(SchedulerCommand):
    help = ("Settle a parked run's attempt as runner_lost through the sweep's own fences (a heartbeat, a result or a "
            "cancel in the meantime wins). Recorded in operator_actions.")

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--reason", default=None, help="why (kept in the audit row)")

    def handle(self, *args, **options):
        repair = repairs.declare_runner_lost(options["run_id"], command_actor(), options["reason"])
        if not repair.changed:
            raise CommandError(repair.line())
        self.stdout.write(repair.line())
