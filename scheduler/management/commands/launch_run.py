"""`launch_run --play NAME [--org ID] [--input JSON] [--launch JSON] [--max-attempts N] [--idempotency-key KEY]`:
print the new run id (or, for a repeat of a keyed launch, the first run's)."""

import json

from django.core.management.base import CommandError

from scheduler.api import parsing
from scheduler.errors import SchedulerError
from scheduler.management.cli import SchedulerCommand
from scheduler.runs import lifecycle


def _json_argument(text, name):
    try:
        return json.loads(text)
    except ValueError:
        raise CommandError(f"{name} must be JSON") from None


class Command(SchedulerCommand):
    help = "Launch a run (admission-fenced) and print its run id."

    def add_arguments(self, parser):
        parser.add_argument("--play", required=True, help="play name")
        parser.add_argument("--org", default=None, help="tenant org id")
        parser.add_argument("--input", default=None, help="input as JSON")
        parser.add_argument("--launch", default="{}", help="launch JSON (requirements §1.8)")
        parser.add_argument("--max-attempts", type=int, default=3, help="1..100 (checked as the launch body's maxAttempts)")
        parser.add_argument("--run-log-store", default=None, choices=["planet_scale"])
        parser.add_argument("--idempotency-key", default=None,
                            help="FSH-5: a repeat with the same key and arguments prints the first run's id")

    def handle(self, *args, **options):
        body = {
            "playName": options["play"],
            "orgId": options["org"],
            "launch": _json_argument(options["launch"], "--launch"),
            "maxAttempts": options["max_attempts"],
            "runLogStore": options["run_log_store"],
            "idempotencyKey": options["idempotency_key"],
        }
        if options["input"] is not None:
            body["input"] = _json_argument(options["input"], "--input")
        try:
            launched = lifecycle.launch_run(parsing.launch_request(body))
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(launched.run_id)
        if launched.deduplicated:
            self.stderr.write("a repeat of an earlier launch with that idempotency key: its run, not a new one")
