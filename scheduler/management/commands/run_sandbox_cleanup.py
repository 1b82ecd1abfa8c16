"""`run_sandbox_cleanup [--once] [--providers daytona,modal,local] [--limit N] [--interval S]`."""

import logging
import os
import socket

from django.core.management.base import BaseCommand, CommandError

from scheduler.cleanup import PROVIDERS
from scheduler.loop import Loop
from scheduler.sweeps import cleanup


class Command(BaseCommand):
    help = "Delete the sandboxes of cleanup obligations, confirm the deletes, adopt legacy rows (CLN-1..7)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--providers", default=",".join(PROVIDERS), help="comma-separated providers to clean")
        parser.add_argument("--limit", type=int, default=20)
        parser.add_argument("--interval", type=float, default=2.0)

    def handle(self, *args, **options):
        providers = [name.strip() for name in options["providers"].split(",") if name.strip()]
        unknown = set(providers) - set(PROVIDERS)
        if unknown or not providers:
            raise CommandError(f"--providers takes a comma-separated subset of {', '.join(PROVIDERS)}")
        if options["limit"] < 1 or options["interval"] < 0:
            raise CommandError("--limit must be at least 1 and --interval not negative")
        owner = f"{socket.gethostname()}:{os.getpid()}"
        Loop("cleanup", lambda: cleanup.run_once(providers, owner, options["limit"]).counts,
             interval=options["interval"], once=options["once"], logger=logging.getLogger("scheduler.sweep.cleanup")).run()
