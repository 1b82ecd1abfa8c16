"""The worker loop every management command shares (django-tasks-db's db_worker, River's services).

`tick()` returns a dict of counts. Between ticks the loop sleeps its interval
with jitter. SIGTERM or SIGINT lets the current tick finish and then exits 0;
a second signal exits at once. Connections are recycled per wake, and each
tick with work logs one line of its non-zero counts.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from typing import Callable

from django.db import close_old_connections, connections


class Loop:
    def __init__(self, name: str, tick: Callable[[], dict], *, interval: float, once: bool = False,
                 jitter: float = 0.1, logger: logging.Logger | None = None):
        self.name = name
        self.tick = tick
        self.interval = interval
        self.once = once
        self.jitter = jitter
        self.logger = logger or logging.getLogger(f"scheduler.loop.{name}")
        self.stopping = threading.Event()

    def _on_signal(self, signum, frame):
        if self.stopping.is_set():
            os._exit(128 + signum)  # second signal: exit hard
        self.logger.info("%s: signal %s, finishing the current tick", self.name, signum)
        self.stopping.set()

    def run(self) -> int:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        try:
            while True:
                close_old_connections()
                counts = self.tick() or {}
                busy = {key: value for key, value in counts.items() if value}
                if busy:
                    self.logger.info("%s tick %s", self.name, " ".join(f"{k}={v}" for k, v in sorted(busy.items())))
                if self.once or self.stopping.is_set():
                    return 0
                pause = self.interval * (1 + random.uniform(-self.jitter, self.jitter))
                if self.stopping.wait(max(0.0, pause)):
                    return 0
        finally:
            connections.close_all()
