"""`mint_runner_token RUN_ID ATTEMPT`: print the runner token for that attempt's current lease."""

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.management.cli import SchedulerCommand, integer
from scheduler.runs import lifecycle
from scheduler.runs.tokens import mint_runner_token


class Command(SchedulerCommand):
    help = "Print the runner token scoped to one attempt's current lease."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("attempt", type=integer(1))

    def handle(self, *args, **options):
        try:
            lease = lifecycle.attempt_lease(options["run_id"], options["attempt"])
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(mint_runner_token(options["run_id"], options["attempt"], lease))
