"""The worker loop every management command shares (django-tasks-db's db_worker, River's services).

`tick()` returns a Tick (or a dict of counts). Between ticks the loop sleeps
its interval with jitter, unless the tick says its batch was full ("go
again", as River's services do) or a wake event is set (a LISTEN
notification). SIGTERM or SIGINT lets the current tick finish and then
exits 0; a second signal exits at once. Connections are recycled per tick
(health-checked only after a quiet second: db.refresh_connections),
each tick with work logs one line of its non-zero counts, and `finish` runs
once when the loop ends (a drainer returns the leases it still holds).
Several loops may run together, one thread each (`run_together`).

Faults are normal: a tick that raises (the database restarted, a provider
misbehaved) logs one line naming the error and the statement, drops the
connection, backs off (0.5 s doubling to 30 s, with jitter, reset by the
next good tick) and goes on. Only a configuration error ends a loop, and
then with a non-zero exit code.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from typing import Callable

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from scheduler import db, observability
from scheduler.faults import describe
from scheduler.tick import Tick

# Errors no retry can fix: the loop ends with a non-zero exit code.
FATAL = (ImproperlyConfigured,)
FAULT_BACKOFF_BASE_S = 0.5
FAULT_BACKOFF_CAP_S = 30.0


def lease_owner(*parts: str) -> str:
    """This process's identity as a lease owner: host, pid, then any parts that tell its threads apart."""
    return ":".join([socket.gethostname(), str(os.getpid()), *parts])


class Loop:
    def __init__(self, name: str, tick: Callable[[], Tick | dict], *, interval: float, once: bool = False,
                 jitter: float = 0.1, logger: logging.Logger | None = None, stopping: threading.Event | None = None,
                 wake: threading.Event | None = None, finish: Callable[[], object] | None = None,
                 arm: Callable[[], object] | None = None, cooldown: float = 0.0):
        self.name = name
        self.tick = tick
        self.interval = interval
        self.once = once
        self.jitter = jitter
        self.logger = logger or logging.getLogger(f"scheduler.loop.{name}")
        self.stopping = stopping or threading.Event()
        self.wake = wake or threading.Event()
        self.finish = finish
        # Asks for a NOTIFY before an idle wait (wake_signals): busy listeners get none, so commits need not notify.
        self.arm = arm
        # The least time from one tick's start to the next after a partial batch (Tick.partial): a busy loop then
        # takes what arrived meanwhile in one statement instead of one statement per arrival.
        self.cooldown = cooldown
        self._armed = False
        self.faults_in_a_row = 0
        self._proven_at = float("-inf")  # when a tick last succeeded: its connections answered then
        self.kind = name.split(" ")[0]  # "drain <owner>" reports as "drain": one metric series per kind of worker

    def run(self) -> int:
        """Run in this thread until stopped; signals are handled when this is the main thread."""
        if threading.current_thread() is threading.main_thread():
            install_signals(self.stopping, self.wake, self.logger, self.name)
        try:
            while True:
                self.wake.clear()  # a notification during this tick wakes the next wait at once
                started = time.monotonic()
                tick = self._guarded_tick()
                if self.stopping.is_set():
                    return 0
                if self.once:
                    return 0 if tick is not None else 1  # a --once tick that failed gave up: non-zero
                if tick is None:
                    self.stopping.wait(self._fault_pause())
                elif tick.again or (tick.partial and self.cooldown > 0):
                    self._armed = False  # busy: the signal may have been consumed meanwhile
                    if tick.partial:
                        self.stopping.wait(max(0.0, started + self.cooldown - time.monotonic()))
                else:
                    if any(tick.counts.values()):
                        self._armed = False
                    if self.arm is not None and not self._armed:
                        # Arm, then look once more at once: work that came before the arming notified nobody.
                        self._armed = self._arm()
                    else:
                        self._idle_wait(tick.due_in)
                if self.stopping.is_set():
                    return 0
        finally:
            self._finish()

    def _idle_wait(self, due_in: float | None = None) -> None:
        pause = self.interval * (1 + random.uniform(-self.jitter, self.jitter))
        if due_in is not None:
            pause = min(pause, due_in)  # wake on time for work the tick knows falls due
        if self.wake.wait(max(0.0, pause)):
            self._armed = False  # the notification disarmed the signal

    def _arm(self) -> bool:
        try:
            self.arm()
            return True
        except FATAL:
            raise
        except Exception as error:  # noqa: BLE001 - without the signal the loop still polls
            self.logger.warning("%s could not arm its wake signal: %s", self.name, describe(error))
            _drop_connections()
            self._idle_wait()
            return False

    def _guarded_tick(self) -> Tick | None:
        """One tick; None when it failed (logged, connection dropped). A configuration error propagates."""
        kind = self.kind
        started = time.monotonic()
        try:
            db.refresh_connections(self._proven_at)
            tick = self._tick()
        except FATAL:
            raise
        except Exception as error:  # noqa: BLE001 - a fault in one tick must not end the worker
            self._proven_at = float("-inf")
            observability.WORKER_TICK_FAILURES.labels(kind).inc()
            self.faults_in_a_row += 1
            self.logger.warning("%s tick failed (%d in a row): %s", self.name, self.faults_in_a_row, describe(error))
            _drop_connections()
            return None
        self._proven_at = time.monotonic()
        observability.WORKER_TICK_SECONDS.labels(kind).observe(self._proven_at - started)
        self.faults_in_a_row = 0
        return tick

    def _fault_pause(self) -> float:
        ceiling = min(FAULT_BACKOFF_CAP_S, FAULT_BACKOFF_BASE_S * 2 ** (self.faults_in_a_row - 1))
        return random.uniform(ceiling / 2, ceiling)

    def _finish(self) -> None:
        try:
            if self.finish is not None:
                self.finish()
        except Exception as error:  # noqa: BLE001 - what finish leaves (leases) expires on its own
            self.logger.warning("%s: could not finish cleanly: %s", self.name, describe(error))
        finally:
            _drop_connections()

    def _tick(self) -> Tick:
        outcome = self.tick()
        tick = outcome if isinstance(outcome, Tick) else Tick(outcome or {})
        busy = {key: value for key, value in tick.counts.items() if value}
        if busy:
            self.logger.info("%s tick %s", self.name, " ".join(f"{k}={v}" for k, v in sorted(busy.items())))
        return tick


def _drop_connections() -> None:
    """Close this thread's connections whatever state they are in; the next tick connects afresh."""
    for connection in connections.all(initialized_only=True):
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - a connection the server already closed may fail to close
            connection.connection = None


def arm_wake_signal(signal: str) -> None:
    """Ask for a NOTIFY on the signal's next event (the loop is going idle)."""
    from scheduler import db

    db.execute("wake_signals_arm", {"channel": signal})


def listen(channel: str, stopping: threading.Event, wake: threading.Event, logger: logging.Logger) -> threading.Thread:
    """A daemon thread that sets `wake` on every NOTIFY on `channel`, reconnecting (with backoff) after a fault.

    Notifications only shorten a wait: a loop that misses one still polls.
    """
    def serve() -> None:
        import psycopg

        from scheduler.db import direct_alias

        # LISTEN needs a session of its own: past any transaction pooler.
        params = connections[direct_alias()].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        failures = 0
        while not stopping.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(f'LISTEN "{channel}"')
                    failures = 0
                    wake.set()  # whatever was notified while it was not listening
                    quiet = 0
                    while not stopping.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            wake.set()
                            quiet = -1
                        quiet += 1
                        if quiet >= RECOVERY_CHECK_QUIET_S:
                            quiet = 0
                            _still_primary(conn)
            except psycopg.Error as error:
                failures += 1
                if failures == 1:
                    logger.warning("LISTEN %s lost (%s); polling until it is back", channel, type(error).__name__)
                stopping.wait(min(FAULT_BACKOFF_CAP_S, FAULT_BACKOFF_BASE_S * 2 ** (failures - 1)))

    thread = threading.Thread(target=serve, name=f"listen-{channel}", daemon=True)
    thread.start()
    return thread


# HA-1: after this many quiet seconds a LISTEN session asks whether its server is still the primary. A standby (a
# demoted primary that kept its sessions) never delivers the new primary's notifications: it is left for the primary.
RECOVERY_CHECK_QUIET_S = 5


def _still_primary(conn) -> None:
    import psycopg

    if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
        raise psycopg.OperationalError("the server listened to is in recovery (a standby now)")


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
    """Run `loops` on one thread each (they share one stopping event); the worst exit code once all have ended.

    A loop that ends on a configuration error stops the others too.
    """
    stopping = loops[0].stopping
    install_signals(stopping, loops[0].wake, logger, name)
    codes: list[int] = []

    def run(loop: Loop) -> None:
        try:
            codes.append(loop.run())
        except FATAL as error:
            logger.error("%s: %s", loop.name, error)
            codes.append(2)
            stopping.set()

    threads = [threading.Thread(target=run, args=(loop,), name=loop.name) for loop in loops]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(timeout=0.2)
    return max(codes, default=0)
