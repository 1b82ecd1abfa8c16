"""`unblock_cleanup PROVIDER SANDBOX_ID [--routing-domain ORG] [--reason TEXT]`: retry a blocked cleanup job (CLN-7)."""

from scheduler.kinds import Provider, values
from scheduler.management.cli import RepairCommand
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor


class Command(RepairCommand):
    help = "Unblock a blocked sandbox cleanup job: pending and due now. Recorded in operator_actions."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("provider", choices=values(Provider))
        parser.add_argument("sandbox_id")
        parser.add_argument("--routing-domain", default=None, help="the job's organization (none for a null domain)")

    def handle(self, *args, **options):
        repair = repairs.unblock_cleanup(options["provider"], options["sandbox_id"], options["routing_domain"],
                                         command_actor(), options["reason"])
        self.report(repair)
