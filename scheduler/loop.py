"""The worker loop every management command shares (django-tasks-db's db_worker, River's services).

`tick()` returns a Tick (or a dict of counts). Between ticks the loop sleeps
its interval with jitter, unless the tick says its batch was full ("go
again", as River's services do) or a wake event is set (a LISTEN
notification). SIGTERM or SIGINT lets the current tick finish and then
exits 0; a second signal exits at once. Connections are recycled per tick,
each tick with work logs one line of its non-zero counts, and `finish` runs
once when the loop ends (a drainer returns the leases it still holds).
Several loops may run together, one thread each (`run_together`).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
from dataclasses import dataclass, field
from typing import Callable

from django.db import close_old_connections, connections


@dataclass
class Tick:
    counts: dict[str, int] = field(default_factory=dict)
    again: bool = False  # the batch was full: go again without sleeping


def backoff_ms(failures: int, base_ms: float, cap_ms: float) -> float:
    """Exponential backoff with full jitter: uniform in [base, min(cap, base * 2^failures)]."""
    ceiling = min(cap_ms, base_ms * (2 ** max(0, failures)))
    return random.uniform(min(base_ms, ceiling), ceiling)


def lease_owner(*parts: str) -> str:
    """This process's identity as a lease owner: host, pid, then any parts that tell its threads apart."""
    return ":".join([socket.gethostname(), str(os.getpid()), *parts])


class Loop:
    def __init__(self, name: str, tick: Callable[[], Tick | dict], *, interval: float, once: bool = False,
                 jitter: float = 0.1, logger: logging.Logger | None = None, stopping: threading.Event | None = None,
                 wake: threading.Event | None = None, finish: Callable[[], object] | None = None):
        self.name = name
        self.tick = tick
        self.interval = interval
        self.once = once
        self.jitter = jitter
        self.logger = logger or logging.getLogger(f"scheduler.loop.{name}")
        self.stopping = stopping or threading.Event()
        self.wake = wake or threading.Event()
        self.finish = finish

    def run(self) -> int:
        """Run in this thread until stopped; signals are handled when this is the main thread."""
        if threading.current_thread() is threading.main_thread():
            install_signals(self.stopping, self.wake, self.logger, self.name)
        try:
            while True:
                close_old_connections()
                self.wake.clear()  # a notification during this tick wakes the next wait at once
                tick = self._tick()
                if self.once or self.stopping.is_set():
                    return 0
                if tick.again:
                    continue
                pause = self.interval * (1 + random.uniform(-self.jitter, self.jitter))
                self.wake.wait(max(0.0, pause))
                if self.stopping.is_set():
                    return 0
        finally:
            try:
                if self.finish is not None:
                    self.finish()
            finally:
                connections.close_all()

    def _tick(self) -> Tick:
        outcome = self.tick()
        tick = outcome if isinstance(outcome, Tick) else Tick(outcome or {})
        busy = {key: value for key, value in tick.counts.items() if value}
        if busy:
            self.logger.info("%s tick %s", self.name, " ".join(f"{k}={v}" for k, v in sorted(busy.items())))
        return tick


def install_signals(stopping: threading.Event, wake: threading.Event, logger: logging.Logger, name: str) -> None:
    def on_signal(signum, frame):
        if stopping.is_set():
            os._exit(128 + signum)  # second signal: exit hard
        logger.info("%s: signal %s, finishing the current tick", name, signum)
        stopping.set()
        wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def run_together(loops: list[Loop], name: str, logger: logging.Logger) -> int:
    """Run `loops` on one thread each (they share one stopping event); return when all have ended."""
    stopping = loops[0].stopping
    install_signals(stopping, loops[0].wake, logger, name)
    threads = [threading.Thread(target=loop.run, name=loop.name) for loop in loops]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(timeout=0.2)
    return 0
