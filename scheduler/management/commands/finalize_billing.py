"""`finalize_billing [--once] [--limit N] [--interval S]` (BIL-1)."""

import logging
import os
import socket

from django.core.management.base import BaseCommand, CommandError

from scheduler.loop import Loop
from scheduler.sweeps import billing


class Command(BaseCommand):
    help = "Turn terminal runs' runtime resources into billing items."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--limit", type=int, default=20)
        parser.add_argument("--interval", type=float, default=5.0)

    def handle(self, *args, **options):
        if options["limit"] < 1 or options["interval"] < 0:
            raise CommandError("--limit must be at least 1 and --interval not negative")
        owner = f"{socket.gethostname()}:{os.getpid()}"
        Loop("billing", lambda: billing.run_once(owner, options["limit"]).counts,
             interval=options["interval"], once=options["once"], logger=logging.getLogger("scheduler.sweep.billing")).run()
