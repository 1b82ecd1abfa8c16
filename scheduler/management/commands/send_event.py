"""`send_event RUN_ID NAME [--payload JSON] [--event-id ID]` (WAIT-3, WAIT-7): send an event to a run.

What POST /internal/runs/{id}/events does: the event is stored (a repeat of its id with the same body is harmless)
and a run waiting for that name resumes. Prints {eventId, stored, resumed}; a bad value or a refused event is one
line and a non-zero exit, with nothing written.
"""

import json

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.management.cli import SchedulerCommand
from scheduler.waits import wakeups


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


class Command(SchedulerCommand):
    help = "Send an event to a run: stored once by its id; a run waiting for its name resumes (WAIT-3)."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("name")
        parser.add_argument("--payload", default="null", help="the event's payload, as JSON (default null)")
        parser.add_argument("--event-id", default=None, help="the event's id: a repeat with it is not stored twice")

    def handle(self, *args, **options):
        try:
            payload = json.loads(options["payload"], parse_constant=_refuse_constant)
        except ValueError as error:
            raise CommandError(f"--payload must be JSON: {error}") from None
        try:
            event = wakeups.Event.checked(options["run_id"], options["name"], payload, options["event_id"])
            sent = wakeups.send(event)
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(json.dumps({"eventId": sent.event_id, "stored": sent.stored, "resumed": sent.resumed}))
