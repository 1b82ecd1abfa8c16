"""Group settlement: terminals arriving on many threads share one settle statement (see runs/batcher.py for why).

The web process's gunicorn threads settle through one BatchSettler; each
caller blocks until its own attempt's settlement committed and gets its own
answer.
"""

from __future__ import annotations

from django.db import connections

from scheduler.conf import scheduler_settings
from scheduler.runs import settlement
from scheduler.runs.batcher import ProcessShared, StatementBatcher


class BatchSettler(StatementBatcher):
    """One daemon thread (with its own connection) settling whatever callers queued, up to `max_batch` at once."""

    def __init__(self, max_batch: int = 32):
        super().__init__(settlement.settle_attempts, max_batch=max_batch, name="batch-settler")

    def settle(self, item: settlement.Settlement) -> settlement.Settled:
        """Queue `item`, wait for its committed answer (as `settlement.settle_attempt` returns it)."""
        return self.submit(item)


_process = ProcessShared(lambda: BatchSettler(scheduler_settings.settle_batch_size))


def shared_settler() -> BatchSettler:
    """This process's settler, started on first use (after a fork, a new one)."""
    return _process.get()


def close_shared() -> None:
    """Stop this process's settler, if one was started, settling what it holds (a gunicorn worker's exit)."""
    _process.close()


def settle(item: settlement.Settlement) -> settlement.Settled:
    """Settle through the shared settler when batching is on and the caller is not inside a transaction.

    A caller inside a transaction settles on its own connection: its
    settlement must commit or roll back with the rest of its work.
    """
    if scheduler_settings.settle_batch_size <= 1 or connections["default"].in_atomic_block:
        return settlement.settle_attempts([item])[0]
    return shared_settler().settle(item)
