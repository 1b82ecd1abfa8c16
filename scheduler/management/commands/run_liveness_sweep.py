"""`run_liveness_sweep [--once] [--limit N] [--default-heartbeat-timeout-ms MS] [--interval S]` (SWP-6)."""

import logging

from scheduler.conf import scheduler_settings
from scheduler.tick import Tick
from scheduler.management.cli import LoopCommand, integer
from scheduler.runs import liveness


class Command(LoopCommand):
    help = "Find vanished runners, record one fenced verdict each, settle recorded terminals, recover stuck claims."
    loop_name = "liveness"
    default_interval = 5.0

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--limit", type=integer(1, 100), default=100, help="candidates per provider per tick")
        parser.add_argument("--default-heartbeat-timeout-ms", type=integer(0), default=None,
                            help="heartbeat timeout of runs whose launch names none (default SCHEDULER_HEARTBEAT_TIMEOUT_MS)")

    def handle(self, *args, **options):
        limit = options["limit"]
        timeout = options["default_heartbeat_timeout_ms"]
        if timeout is None:
            timeout = scheduler_settings.heartbeat_timeout_ms
        cursors: dict = {}

        def tick():
            result = liveness.run_once(limit, timeout, cursors)
            cursors.clear()
            cursors.update(liveness.next_cursors(result, limit))
            # A provider whose page was full has more stale runners: walk on at once.
            return Tick(result.counts, again=bool(cursors))

        self.run_loop(tick, options, logging.getLogger("scheduler.sweep.liveness"))
