"""Pruning (RET-1..4): whole finished runs past retention, in bounded batches, never one with an open obligation.

One tick: one prune statement (retention_prune_runs) in a transaction that marks itself as the prune (the tombstone
guards let only it delete) and bounds itself (lock and statement timeouts: it never holds what the hot path waits
on for long), then one batch of billing items on their own clock (RET-2). A full batch goes again soon: after a
pause seven times as long as itself. `--batch` is the most runs one statement takes; the loop takes fewer when
that many would run past STATEMENT_BUDGET_MS, sizing each statement from the last one's rate, and starts each
statement after the last run the one before picked (the runs held past retention are walked once a pass).
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
# What one prune statement aims to last: it holds its runs' locks and a core for that long. On this machine 500 runs
# take about 25 ms, so the budget caps a slower server's statements rather than this one's.
STATEMENT_BUDGET_MS = 20.0
SMALLEST_BATCH = 10


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
    """One batch of at most `batch` runs, from the oldest. A full batch asks to go again after a pause seven times
    as long as it took: pruning a large backlog takes at most an eighth of one core (RET-3)."""
    return _prune(batch, retention or Retention.configured(), now, None)[0]


@dataclass(frozen=True)
class Pass:
    """Where a pass over the finished runs stands after a batch: the last run it picked, and its rate."""

    after: tuple[dt.datetime, str] | None  # None: the pass is over; the next batch starts from the oldest run
    runs_per_ms: float


def _prune(batch: int, retention: Retention, now: dt.datetime | None,
           after: tuple[dt.datetime, str] | None) -> tuple[Tick, Pass]:
    started = time.monotonic()
    with transaction.atomic():
        db.run("retention_begin_prune", {"statement_timeout": f"{TICK_DEADLINE_MS}ms",
                                         "lock_timeout": f"{LOCK_TIMEOUT_MS}ms"})
        pruned = db.fetch_one("retention_prune_runs", {
            "cutoff": cutoff(retention.run_days, now), "batch": batch,
            "after_finished_at": after[0] if after else None, "after_run_id": after[1] if after else None})
    elapsed_ms = (time.monotonic() - started) * 1000
    items = db.execute("retention_prune_billing_items", {"cutoff": cutoff(retention.billing_days, now), "batch": batch})
    counts = {"runs": pruned["runs"], "rows": pruned["rows"], "fires_unlinked": pruned["fires_unlinked"],
              "billing_items": items, "skipped_locked": pruned["candidates"] - pruned["runs"],
              "batch": batch if pruned["runs"] else 0}  # the statement's size, in the tick's log line
    full = pruned["candidates"] >= batch or items >= batch
    tick = Tick(counts, due_in=(time.monotonic() - started) * PAUSE_RATIO if full else None)
    position = (pruned["last_finished_at"], pruned["last_run_id"]) if pruned["candidates"] >= batch else None
    return tick, Pass(position, pruned["runs"] / max(elapsed_ms, 0.001))


class Pruner:
    """The loop's pruning: passes over the finished runs in statements of at most `ceiling` runs, each sized to
    last about STATEMENT_BUDGET_MS, each starting where the one before stopped."""

    def __init__(self, ceiling: int = DEFAULT_BATCH, retention: Retention | None = None):
        self.ceiling = ceiling
        self.retention = retention or Retention.configured()
        self.batch = ceiling
        self.after: tuple[dt.datetime, str] | None = None

    def tick(self, now: dt.datetime | None = None) -> Tick:
        tick, progress = _prune(self.batch, self.retention, now, self.after)
        self.after = progress.after
        if progress.runs_per_ms:
            self.batch = max(min(SMALLEST_BATCH, self.ceiling),
                             min(self.ceiling, round(progress.runs_per_ms * STATEMENT_BUDGET_MS)))
        return tick


def held(now: dt.datetime | None = None) -> dict[HeldReason, int]:
    """RET-1: finished runs past retention that pruning keeps, by the obligation that keeps them."""
    row = db.fetch_one("retention_held", {"cutoff": cutoff(scheduler_settings.retention_days, now)})
    return {reason: row[reason.value] for reason in HeldReason}


def held_run_ids(reason: HeldReason, limit: int = 1000, now: dt.datetime | None = None) -> list[str]:
    """The oldest runs one obligation keeps past retention (the dashboard links them)."""
    rows = db.fetch_all("retention_held_run_ids", {"cutoff": cutoff(scheduler_settings.retention_days, now),
                                                   "reason": reason.value, "limit": limit})
    return [row["run_id"] for row in rows]
