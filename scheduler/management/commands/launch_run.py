"""`launch_run --play NAME [--org ID] [--input JSON] [--launch JSON] [--max-attempts N]`: print the new run id."""

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

    def handle(self, *args, **options):
        body = {
            "playName": options["play"],
            "orgId": options["org"],
            "launch": _json_argument(options["launch"], "--launch"),
            "maxAttempts": options["max_attempts"],
            "runLogStore": options["run_log_store"],
        }
        if options["input"] is not None:
            body["input"] = _json_argument(options["input"], "--input")
        try:
            run_id = lifecycle.launch_run(parsing.launch_request(body)).run_id
        except SchedulerError as error:
            raise CommandError(error.message) from None
        self.stdout.write(run_id)
