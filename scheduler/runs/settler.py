"""Group settlement: terminals arriving on many threads share one settle statement.

Why: most of a single settlement's cost is the statement's fixed cost (five
tables opened with their constraints, indexes and triggers), not its rows. A
process that receives terminals concurrently (gunicorn's threads, a worker
pool) pays that cost once per batch, as River's batch completer does for job
states. Each caller still blocks until its own attempt's settlement committed
and gets its own answer; every fence stays per item inside the statement.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from concurrent.futures import Future

from django.db import close_old_connections, connections

from scheduler.conf import scheduler_settings
from scheduler.runs import settlement

logger = logging.getLogger(__name__)

WAIT_SECONDS = 60
# A connection that answered a batch this recently is not health-checked again before the next one.
HEALTHY_FOR_SECONDS = 1.0


class BatchSettler:
    """One daemon thread (with its own connection) settling whatever callers queued, up to `max_batch` at once."""

    def __init__(self, max_batch: int = 32):
        self.max_batch = max(1, int(max_batch))
        self.statements = 0
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._held: list = []
        self._proven_at = float("-inf")
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="batch-settler", daemon=True)
        self._thread.start()

    def settle(self, item: settlement.Settlement) -> settlement.Settled:
        """Queue `item`, wait for its committed answer (as `settlement.settle_attempt` returns it)."""
        if self._closed.is_set():
            raise RuntimeError("the batch settler is closed")
        future: Future = Future()
        self._queue.put((item, future))
        return future.result(timeout=WAIT_SECONDS)

    def close(self) -> None:
        """Settle what is already queued, then stop the thread and close its connection."""
        self._closed.set()
        self._queue.put(None)
        self._thread.join(timeout=WAIT_SECONDS)

    def _serve(self) -> None:
        try:
            while batch := self._next_batch():
                try:
                    self._settle_batch(batch)
                except Exception as error:  # noqa: BLE001 - the thread must outlive any one batch
                    logger.exception("batch settlement of %d items failed outside its statement", len(batch))
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
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

    def _settle_batch(self, batch: list) -> None:
        # Django's check (a SELECT 1 round trip, on every batch's critical path) only after a quiet second: a
        # connection that just answered is alive, and a broken one fails the batch over to one-by-one below.
        if time.monotonic() - self._proven_at > HEALTHY_FOR_SECONDS:
            close_old_connections()
        else:
            # A busy settler still honours CONN_MAX_AGE (what close_old_connections would have done).
            connection = connections["default"]
            if connection.close_at is not None and time.monotonic() >= connection.close_at:
                connection.close()
        try:
            answers = settlement.settle_attempts([item for item, _ in batch])
            self._proven_at = time.monotonic()
            self.statements += 1
        except Exception:  # noqa: BLE001 - one bad item must not fail its neighbours
            self._proven_at = float("-inf")
            logger.warning("batch settlement of %d items failed; settling them one by one", len(batch), exc_info=True)
            connections["default"].close_if_unusable_or_obsolete()
            self._settle_alone(batch)
            return
        for (_, future), answer in zip(batch, answers):
            future.set_result(answer)

    def _settle_alone(self, batch: list) -> None:
        for item, future in batch:
            try:
                future.set_result(settlement.settle_attempts([item])[0])
                self.statements += 1
            except Exception as error:  # noqa: BLE001 - the caller gets its own error
                future.set_exception(error)
            finally:
                connections["default"].close_if_unusable_or_obsolete()


_lock = threading.Lock()
_shared: tuple[int, BatchSettler] | None = None


def shared_settler() -> BatchSettler:
    """This process's settler, started on first use (after a fork, a new one)."""
    global _shared
    with _lock:
        if _shared is None or _shared[0] != os.getpid():
            _shared = (os.getpid(), BatchSettler(scheduler_settings.settle_batch_size))
        return _shared[1]


def close_shared() -> None:
    """Stop this process's settler, if one was started, settling what it holds (a gunicorn worker's exit)."""
    global _shared
    with _lock:
        shared, _shared = _shared, None
    if shared is not None and shared[0] == os.getpid():
        shared[1].close()


def settle(item: settlement.Settlement) -> settlement.Settled:
    """Settle through the shared settler when batching is on and the caller is not inside a transaction.

    A caller inside a transaction settles on its own connection: its
    settlement must commit or roll back with the rest of its work.
    """
    if scheduler_settings.settle_batch_size <= 1 or connections["default"].in_atomic_block:
        return settlement.settle_attempts([item])[0]
    return shared_settler().settle(item)
