"""`dispatch_runs [--once] [--limit N] [--interval S]`: claim queued runs, start their sandboxes, park them."""

import logging

from django.core.management.base import BaseCommand, CommandError

from scheduler import dispatch
from scheduler.loop import Loop


class Command(BaseCommand):
    help = "Claim queued runs (RUN-2), start each in its sandbox and park it (RUN-3)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one tick, then exit")
        parser.add_argument("--limit", type=int, default=10, help="claims per tick")
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks")

    def handle(self, *args, **options):
        if options["limit"] < 1 or options["interval"] < 0:
            raise CommandError("--limit must be at least 1 and --interval not negative")
        loop = Loop("dispatch", lambda: dispatch.run_once(options["limit"]).counts,
                    interval=options["interval"], once=options["once"], logger=logging.getLogger("scheduler.dispatch"))
        loop.run()
