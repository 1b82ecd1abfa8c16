"""Group statements: items arriving on many threads share one array-driven statement.

Why: most of a single settlement's or park's cost is the statement's fixed
cost (tables opened with their constraints, indexes and triggers, and a
commit), not its rows. A process that produces them concurrently (gunicorn's
threads, a dispatcher's start threads) pays that cost once per batch, as
River's batch completer does for job states. Each caller still blocks until
its own item committed and gets its own answer; every fence stays per item
inside the statement.

Under load a group also gathers (issue 47): once items keep overlapping on
their own, each batch waits up to SCHEDULER_BATCH_LINGER_MS for more before
its statement runs, as PostgreSQL's commit_delay waits for commit siblings. A
saturated machine's batches held one or two items (about one terminal a
statement); gathered, they hold several, and a run costs the database less.
A quiet group never waits: its lone items run at once.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from django.db import connections

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.faults import describe

logger = logging.getLogger(__name__)

WAIT_SECONDS = 60
# What was waiting when the group's thread took a batch (a lone item run on its caller's thread counts as one),
# averaged over about the last GATHER_WINDOW batches. The group gathers from GATHER_FROM and stops below
# GATHER_UNTIL, so a load near the line does not switch every batch. At 37 runs/s on the soak's stack the
# average read 1.00-1.01 for every group; at 140 runs/s 1.33 (launches) to 1.72 (heartbeats).
GATHER_WINDOW = 16
GATHER_FROM, GATHER_UNTIL = 1.2, 1.1


class StatementBatcher:
    """One daemon thread (with its own connection) running whatever callers queued, up to `max_batch` at once.

    `run_batch` takes a list of items (each naming a distinct run) and returns one answer per item, in order.
    """

    def __init__(self, run_batch: Callable[[list], list], *, max_batch: int = 32, name: str = "batcher",
                 linger: float | None = None):
        """`linger`: seconds a gathering batch waits for more items (default SCHEDULER_BATCH_LINGER_MS; 0 never)."""
        self.run_batch = run_batch
        self.name = name
        self.max_batch = max(1, int(max_batch))
        self.linger = scheduler_settings.batch_linger_ms / 1000 if linger is None else max(0.0, linger)
        self.statements = 0
        self.overlap = 1.0  # the average of what was waiting when a batch was taken (GATHER_WINDOW)
        self.gathering = False
        # Callers inside submit() now, the most since the last batch was taken, and that most for each of the
        # last GATHER_WINDOW batches: a gathering batch is full at the largest, as more callers than were ever
        # in flight at once (a web process's request threads) cannot come.
        self._callers = 0
        self._busiest = 0
        self._recent_busiest: deque[int] = deque(maxlen=GATHER_WINDOW)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._held: list = []
        self._proven_at = float("-inf")
        self._closed = threading.Event()
        # Items running now, in a batch or alone on their caller's thread (submit's `here`).
        self._in_flight = 0
        self._flight = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, item, *, here: Callable[[], object] | None = None):
        """Queue `item`, wait for its committed answer (as `run_batch` gives it for a batch of one).

        With `here`, an item that finds nothing of this batcher's in flight runs `here()` on the caller's thread
        instead: a lone item is not handed to another thread and back (each hand-over may wait for the GIL), and
        items that arrive while it runs are grouped as before, so batching starts exactly when items overlap.
        """
        if self._closed.is_set():
            raise RuntimeError(f"the {self.name} is closed")
        with self._flight:
            self._callers += 1
            self._busiest = max(self._busiest, self._callers)
            alone = here is not None and self._claim_idle()
        try:
            if alone:
                try:
                    return here()
                finally:
                    self._landed(1)
            future: Future = Future()
            self._queue.put((item, future))
            return future.result(timeout=WAIT_SECONDS)
        finally:
            with self._flight:
                self._callers -= 1

    def close(self) -> None:
        """Run what is already queued, then stop the thread and close its connection."""
        self._closed.set()
        self._queue.put(None)
        self._thread.join(timeout=WAIT_SECONDS)

    def _claim_idle(self) -> bool:
        """Whether a lone item may run on its caller's thread (under self._flight), counting it as a batch."""
        if self.gathering or self._in_flight or not self._queue.empty() or self._held:
            return False
        self._in_flight += 1
        self._observe(1)
        return True

    def _observe(self, waiting: int) -> None:
        """Count a batch taken with `waiting` items ready (under self._flight): gather while they overlap."""
        self._recent_busiest.append(self._busiest)
        self._busiest = self._callers
        self.overlap += (waiting - self.overlap) / GATHER_WINDOW
        threshold = GATHER_UNTIL if self.gathering else GATHER_FROM
        self.gathering = self.linger > 0 and self.overlap >= threshold

    def _landed(self, items: int) -> None:
        with self._flight:
            self._in_flight -= items

    def _serve(self) -> None:
        try:
            while batch := self._next_batch():
                with self._flight:
                    self._in_flight += len(batch)
                try:
                    self._run(batch)
                except BaseException as error:  # noqa: BLE001 - the thread outlives any one batch; its callers see why
                    logger.exception("%s: a batch of %d items failed outside its statement", self.name, len(batch))
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                finally:
                    self._landed(len(batch))
        finally:
            connections.close_all()

    def _next_batch(self) -> list:
        """What is queued now, up to max_batch; a second item for a run already in the batch waits for the next.

        Empty once closed and drained.
        """
        pending, self._held = self._held, []
        if not pending and not (self._closed.is_set() and self._queue.empty()):
            pending.append(self._queue.get())
        while len(pending) < self.max_batch * 2:
            try:
                pending.append(self._queue.get_nowait())
            except queue.Empty:
                break
        with self._flight:
            self._observe(len(pending))
            gather = self.gathering and None not in pending
            full = min(self.max_batch, max(self._recent_busiest)) if gather else 0
        if gather:
            self._gather(pending, full)
        batch, runs = [], set()
        for entry in pending:
            if entry is None:
                continue
            if len(batch) < self.max_batch and entry[0].run_id not in runs:
                batch.append(entry)
                runs.add(entry[0].run_id)
            else:
                self._held.append(entry)
        if not batch and not self._closed.is_set():
            return self._next_batch()
        return batch

    def _gather(self, pending: list, full: int) -> None:
        """Wait up to `linger` for more items, until `full` are ready (or the batcher closes)."""
        deadline = time.monotonic() + self.linger
        while len(pending) < full:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                entry = self._queue.get(timeout=left)
            except queue.Empty:
                return
            pending.append(entry)
            if entry is None:
                return

    def _run(self, batch: list) -> None:
        db.refresh_connections(self._proven_at)
        try:
            answers = self.run_batch([item for item, _ in batch])
            self._proven_at = time.monotonic()
            self.statements += 1
        except Exception as error:  # noqa: BLE001 - one bad item must not fail its neighbours
            self._proven_at = float("-inf")
            # One line, as a worker's failed tick: a database restart fails every batch in flight, and each
            # caller gets its own item's error (with its traceback, where it is logged) from the run alone.
            logger.warning("%s: a batch of %d items failed (%s); running them one by one", self.name, len(batch),
                           describe(error))
            connections["default"].close_if_unusable_or_obsolete()
            self._run_alone(batch)
            return
        for (_, future), answer in zip(batch, answers):
            future.set_result(answer)

    def _run_alone(self, batch: list) -> None:
        for item, future in batch:
            try:
                future.set_result(self.run_batch([item])[0])
                self.statements += 1
            except Exception as error:  # noqa: BLE001 - the caller gets its own error
                future.set_exception(error)
            finally:
                connections["default"].close_if_unusable_or_obsolete()


class ProcessShared:
    """One batcher per process, started on first use by `make` (a forked child starts its own); every one made is
    closed together by close_all() (a web worker's exit)."""

    _every: list[ProcessShared] = []

    def __init__(self, make: Callable[[], StatementBatcher], batch_size: Callable[[], int]):
        self._make = make
        self._batch_size = batch_size
        self._lock = threading.Lock()
        self._shared: tuple[int, StatementBatcher] | None = None
        ProcessShared._every.append(self)

    @property
    def started(self) -> bool:
        return self._shared is not None

    def takes_this_thread(self) -> bool:
        """Whether this thread's item goes through the group: batching is on, and no transaction is open (an item
        inside one must commit or roll back with the rest of the caller's work, on the caller's connection)."""
        return self._batch_size() > 1 and not connections["default"].in_atomic_block

    def get(self) -> StatementBatcher:
        with self._lock:
            if self._shared is None or self._shared[0] != os.getpid():
                self._shared = (os.getpid(), self._make())
            return self._shared[1]

    def close(self) -> None:
        """Stop this process's batcher, if one was started, running what it holds."""
        with self._lock:
            shared, self._shared = self._shared, None
        if shared is not None and shared[0] == os.getpid():
            shared[1].close()

    @classmethod
    def close_all(cls) -> None:
        """Stop every group batcher this process started, each running what it holds first."""
        for shared in cls._every:
            shared.close()
