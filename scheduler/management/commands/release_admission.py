"""`release_admission show|open|close RELEASE_ID [--epoch N] [--environment preview|production]`."""

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.management.cli import SchedulerCommand, integer
from scheduler.operations import repairs
from scheduler.operations.cli_actor import command_actor
from scheduler.runs import admission


class Command(SchedulerCommand):
    help = "Show, open or close a release's admission of new runs."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["show", "open", "close"])
        parser.add_argument("release_id")
        parser.add_argument("--epoch", type=integer(0, 2**53 - 1), default=None, help="admission epoch (required for open and close)")
        parser.add_argument("--environment", choices=list(admission.ENVIRONMENTS), default=None)
        parser.add_argument("--reason", default=None, help="why (kept in the operator_actions audit row)")

    def handle(self, *args, **options):
        action, release_id, environment = options["action"], options["release_id"], options["environment"]
        try:
            if action == "show":
                state = admission.read_admission(release_id, environment)
            else:
                if options["epoch"] is None:
                    raise CommandError(f"{action} needs --epoch N")
                # Audited like the admin's action; a refused opening changes nothing and says why.
                repair = repairs.set_release_admission(release_id, action == "open", options["epoch"], environment,
                                                       command_actor(), options["reason"])
                if not repair.changed and "admission opening refused" in repair.outcome:
                    raise CommandError(repair.outcome.removeprefix("nothing changed: "))
                state = admission.read_admission(release_id, environment)
        except SchedulerError as error:
            raise CommandError(error.message) from None
        if state is None:
            raise CommandError(f'release "{release_id.strip()}" is unknown')
        self.stdout.write(
            f"{release_id.strip()}: {'accepting' if state.accepting else 'closed'} at epoch {state.admission_epoch}"
        )
