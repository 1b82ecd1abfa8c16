"""Pruning (RET-1..4): whole finished runs past retention, in bounded batches, never one with an open obligation.

One tick: one prune statement (retention_prune_runs) in a transaction that marks itself as the prune (the tombstone
guards let only it delete) and bounds itself (lock and statement timeouts: it never holds what the hot path waits
on for long), then one batch of billing items on their own clock (RET-2). A full batch goes again soon: after a
pause seven times as long as itself.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from django.db import transaction

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.kinds import HeldReason
from scheduler.tick import Tick

DEFAULT_BATCH = 500
# A prune statement that has not finished in this long gives up and is retried next tick with what is left.
TICK_DEADLINE_MS = 10_000
LOCK_TIMEOUT_MS = 1_000
# After a full batch, the loop waits this many times as long as the batch took before the next one: a backlog is
# pruned with at most an eighth of one core (still ~700 runs/s here, seven times what a 100 runs/s platform
# finishes), so that on a saturated machine the runners' calls beside it keep their latency.
PAUSE_RATIO = 7.0


def cutoff(days: int, now: dt.datetime | None = None) -> dt.datetime:
    return (now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=days)


@dataclass(frozen=True)
class Retention:
    """How long finished runs and billing items are kept (the settings, or a one-off `--older-than-days`)."""

    run_days: int
    billing_days: int

    @classmethod
    def configured(cls, older_than_days: int | None = None) -> "Retention":
        run_days = scheduler_settings.retention_days if older_than_days is None else older_than_days
        return cls(run_days, scheduler_settings.billing_retention_days)


def run_once(batch: int = DEFAULT_BATCH, retention: Retention | None = None, now: dt.datetime | None = None) -> Tick:
    """One batch. A full batch asks to go again after a pause seven times as long as it took: pruning a large
    backlog takes at most an eighth of one core, so the runners' calls beside it keep their latency (RET-3)."""
    retention = retention or Retention.configured()
    started = time.monotonic()
    with transaction.atomic():
        db.run("retention_begin_prune", {"statement_timeout": f"{TICK_DEADLINE_MS}ms",
                                         "lock_timeout": f"{LOCK_TIMEOUT_MS}ms"})
        pruned = db.fetch_one("retention_prune_runs", {"cutoff": cutoff(retention.run_days, now), "batch": batch})
    items = db.execute("retention_prune_billing_items", {"cutoff": cutoff(retention.billing_days, now), "batch": batch})
    counts = {"runs": pruned["runs"], "rows": pruned["rows"], "fires_unlinked": pruned["fires_unlinked"],
              "billing_items": items, "skipped_locked": pruned["candidates"] - pruned["runs"]}
    full = pruned["candidates"] >= batch or items >= batch
    return Tick(counts, due_in=(time.monotonic() - started) * PAUSE_RATIO if full else None)


def held(now: dt.datetime | None = None) -> dict[HeldReason, int]:
    """RET-1: finished runs past retention that pruning keeps, by the obligation that keeps them."""
    row = db.fetch_one("retention_held", {"cutoff": cutoff(scheduler_settings.retention_days, now)})
    return {reason: row[reason.value] for reason in HeldReason}


def held_run_ids(reason: HeldReason, limit: int = 1000, now: dt.datetime | None = None) -> list[str]:
    """The oldest runs one obligation keeps past retention (the dashboard links them)."""
    rows = db.fetch_all("retention_held_run_ids", {"cutoff": cutoff(scheduler_settings.retention_days, now),
                                                   "reason": reason.value, "limit": limit})
    return [row["run_id"] for row in rows]
