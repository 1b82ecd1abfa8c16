"""Group settlement: terminals arriving on many threads share one settle statement (see runs/batcher.py for why).

The web process's gunicorn threads settle through one BatchSettler; each
caller blocks until its own attempt's settlement committed and gets its own
answer.
"""

from __future__ import annotations

import os
import threading

from django.db import connections

from scheduler.conf import scheduler_settings
from scheduler.runs import settlement
from scheduler.runs.batcher import StatementBatcher


class BatchSettler(StatementBatcher):
    """One daemon thread (with its own connection) settling whatever callers queued, up to `max_batch` at once."""

    def __init__(self, max_batch: int = 32):
        super().__init__(settlement.settle_attempts, max_batch=max_batch, name="batch-settler")

    def settle(self, item: settlement.Settlement) -> settlement.Settled:
        """Queue `item`, wait for its committed answer (as `settlement.settle_attempt` returns it)."""
        return self.submit(item)


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
