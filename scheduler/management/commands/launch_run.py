"""`launch_run --play NAME [--org ID] [--input JSON] [--launch JSON] [--max-attempts N] [--idempotency-key KEY]
[--priority N] [--concurrency-key KEY --concurrency-limit N] [--run-after ISO]`: print the new run id (or, for a
repeat of a keyed launch, the first run's). Each option is checked as the launch body's field of that meaning."""

import json

from django.core.management.base import CommandError

from scheduler.errors import SchedulerError
from scheduler.management.cli import SchedulerCommand
from scheduler.runs import launch_body, lifecycle


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
        parser.add_argument("--priority", type=int, default=0, help="FSH-3: -100..100, higher first within the org")
        parser.add_argument("--concurrency-key", default=None, help="FSH-2: at most --concurrency-limit active runs "
                                                                   "of the org hold this key")
        parser.add_argument("--concurrency-limit", type=int, default=None, help="FSH-2: 1..1000")
        parser.add_argument("--run-after", default=None, help="FSH-7: ISO 8601 with a zone; not claimed before")

    def handle(self, *args, **options):
        body = {
            "playName": options["play"],
            "orgId": options["org"],
            "launch": _json_argument(options["launch"], "--launch"),
            "maxAttempts": options["max_attempts"],
            "runLogStore": options["run_log_store"],
            "idempotencyKey": options["idempotency_key"],
            "priority": options["priority"],
            "runAfter": options["run_after"],
        }
        if options["concurrency_key"] is not None or options["concurrency_limit"] is not None:
            body["concurrency"] = {"key": options["concurrency_key"], "limit": options["concurrency_limit"]}
        if options["input"] is not None:
            body["input"] = _json_argument(options["input"], "--input")
        try:
            launched = lifecycle.launch_run(launch_body.launch_request(body))
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(launched.run_id)
        if launched.deduplicated:
            self.stderr.write("a repeat of an earlier launch with that idempotency key: its run, not a new one")
