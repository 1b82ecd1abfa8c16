"""Group settlement: terminals arriving on many threads share one settle statement (see runs/batcher.py for why).

The web process's gunicorn threads settle through one BatchSettler; each
caller blocks until its own attempt's settlement committed and gets its own
answer.
"""

from __future__ import annotations

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


_process = ProcessShared(lambda: BatchSettler(scheduler_settings.settle_batch_size),
                         lambda: scheduler_settings.settle_batch_size)


def shared_settler() -> BatchSettler:
    """This process's settler, started on first use (after a fork, a new one)."""
    return _process.get()


def settle(item: settlement.Settlement) -> settlement.Settled:
    """Settle through the shared settler when it takes this thread's item, else on this thread's connection."""
    if not _process.takes_this_thread():
        return settlement.settle_attempts([item])[0]
    return shared_settler().settle(item)
