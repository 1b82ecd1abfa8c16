"""`release_admission show|open|close RELEASE_ID [--epoch N] [--environment preview|production]`."""

from django.core.management.base import BaseCommand, CommandError

from scheduler import admission
from scheduler.errors import SchedulerError


class Command(BaseCommand):
    help = "Show, open or close a release's admission of new runs."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["show", "open", "close"])
        parser.add_argument("release_id")
        parser.add_argument("--epoch", type=int, default=None, help="admission epoch (required for open and close)")
        parser.add_argument("--environment", choices=list(admission.ENVIRONMENTS), default=None)

    def handle(self, *args, **options):
        action, release_id, environment = options["action"], options["release_id"], options["environment"]
        try:
            if action == "show":
                state = admission.read_admission(release_id, environment)
            else:
                if options["epoch"] is None:
                    raise CommandError(f"{action} needs --epoch N")
                state = admission.set_admission(release_id, action == "open", options["epoch"], environment)
        except SchedulerError as error:
            raise CommandError(error.message) from None
        if state is None:
            raise CommandError(f'release "{release_id.strip()}" is unknown')
        self.stdout.write(
            f"{release_id.strip()}: {'accepting' if state.accepting else 'closed'} at epoch {state.admission_epoch}"
        )
