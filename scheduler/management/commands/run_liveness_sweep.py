"""`run_liveness_sweep [--once] [--limit N] [--default-heartbeat-timeout-ms MS] [--interval S]` (SWP-6)."""

import logging

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduler.loop import Loop
from scheduler.sweeps import liveness


class Command(BaseCommand):
    help = "Find vanished runners, record one fenced verdict each, settle recorded terminals, recover stuck claims."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one tick, then exit")
        parser.add_argument("--limit", type=int, default=100, help="candidates per provider per tick (1..100)")
        parser.add_argument("--default-heartbeat-timeout-ms", type=int, default=settings.SCHEDULER_HEARTBEAT_TIMEOUT_MS)
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between ticks")

    def handle(self, *args, **options):
        limit, timeout = options["limit"], options["default_heartbeat_timeout_ms"]
        if not 1 <= limit <= 100:
            raise CommandError("--limit must be between 1 and 100")
        if timeout < 0 or options["interval"] < 0:
            raise CommandError("--default-heartbeat-timeout-ms and --interval must not be negative")
        cursors: dict = {}

        def tick():
            result = liveness.run_once(limit, timeout, cursors)
            cursors.clear()
            cursors.update(liveness.next_cursors(result, limit))
            return result.counts

        Loop("liveness", tick, interval=options["interval"], once=options["once"],
             logger=logging.getLogger("scheduler.sweep.liveness")).run()
