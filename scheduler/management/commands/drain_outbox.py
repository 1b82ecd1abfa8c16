"""`drain_outbox [--once] [--batch N] [--lane ledger|search] [--head-priority P] [--workers N]` (OBX-9).

Each worker is a thread with its own connection and lease owner. A LISTEN
connection wakes them when a fact is inserted; polling is the fallback.
SIGTERM lets each worker finish its prefix, returns the leases it still
holds, and exits 0.
"""

import logging
import os
import socket
import threading
import uuid

import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connections

from scheduler import outbox
from scheduler.sweeps import outbox as drainer

logger = logging.getLogger("scheduler.drain")


class Command(BaseCommand):
    help = "Deliver outbox facts to their run-ledger receivers in per-run causal order."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="drain what is ready once, then exit")
        parser.add_argument("--batch", type=int, default=50, help="prefixes per worker per tick")
        parser.add_argument("--lane", choices=outbox.LANES, default="ledger")
        parser.add_argument("--head-priority", choices=outbox.HEAD_PRIORITIES, default="admission_first")
        parser.add_argument("--workers", type=int, default=1)
        parser.add_argument("--interval", type=float, default=1.0, help="poll interval when idle (seconds)")
        parser.add_argument("--max-attempts", type=int, default=10, help="delivery attempts before a head is failed")
        parser.add_argument("--lease-seconds", type=float, default=30.0, help="how long a claimed prefix is held")

    def handle(self, *args, **options):
        if (options["batch"] < 1 or not 1 <= options["workers"] <= 64 or options["interval"] < 0
                or options["max_attempts"] < 1 or options["lease_seconds"] <= 0):
            raise CommandError("--batch and --max-attempts must be at least 1, --workers 1..64, --interval not negative")
        stopping, wake = threading.Event(), threading.Event()
        self._install_signals(stopping, wake)
        owner_base = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        listener = None if options["once"] else threading.Thread(target=self._listen, args=(stopping, wake), daemon=True)
        if listener:
            listener.start()
        workers = [threading.Thread(target=self._work, args=(f"{owner_base}:{index}", options, stopping, wake))
                   for index in range(options["workers"])]
        for worker in workers:
            worker.start()
        while any(worker.is_alive() for worker in workers):
            for worker in workers:
                worker.join(timeout=0.2)

    def _install_signals(self, stopping, wake):
        import signal

        def on_signal(signum, frame):
            if stopping.is_set():
                os._exit(128 + signum)
            logger.info("drain: signal %s, finishing current prefixes", signum)
            stopping.set()
            wake.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _work(self, owner, options, stopping, wake):
        try:
            while not stopping.is_set():
                close_old_connections()
                wake.clear()  # a fact inserted during this tick wakes the next wait at once
                result = drainer.run_once(owner, lane=options["lane"], head_priority=options["head_priority"],
                                          batch=options["batch"], max_attempts=options["max_attempts"],
                                          lease_seconds=options["lease_seconds"],
                                          should_stop=stopping.is_set)
                busy = {k: v for k, v in result.counts.items() if v}
                if busy:
                    logger.info("drain %s %s", owner, " ".join(f"{k}={v}" for k, v in sorted(busy.items())))
                if options["once"] and not busy.get("claimed"):
                    return
                if not busy.get("claimed"):
                    wake.wait(options["interval"])
        finally:
            try:
                outbox.release_all(owner)
            finally:
                connections.close_all()

    def _listen(self, stopping, wake):
        """LISTEN on <schema>_outbox_wake; any notification wakes the idle workers."""
        params = connections["default"].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        try:
            with psycopg.connect(**params, autocommit=True) as conn:
                conn.execute(f'LISTEN "{settings.SCHEDULER_SCHEMA}_outbox_wake"')
                while not stopping.is_set():
                    for _ in conn.notifies(timeout=1.0, stop_after=1):
                        wake.set()
        except psycopg.Error as error:
            logger.warning("drain: LISTEN unavailable (%s); polling only", type(error).__name__)
