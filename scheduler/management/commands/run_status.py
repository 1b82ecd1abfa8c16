"""`run_status RUN_ID`: print a run's status snapshot as JSON (what GET /internal/runs/{id} answers)."""

import json

from django.core.management.base import CommandError

from scheduler.api import responses
from scheduler.errors import SchedulerError
from scheduler.management.cli import SchedulerCommand
from scheduler.runs import lifecycle


class Command(SchedulerCommand):
    help = "Print a run's status: attempts with their verdicts, output or error, its facts' delivery."

    def add_arguments(self, parser):
        parser.add_argument("run_id")

    def handle(self, *args, **options):
        try:
            snapshot = lifecycle.run_status(options["run_id"])
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(json.dumps(responses.run_snapshot(snapshot, include_definition_scope=True), indent=2))
