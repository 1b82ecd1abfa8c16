"""Drain the outbox (OBX-6, OBX-9): claim a prefix, deliver it outside any transaction, settle the lease.

A prefix bound for this database was already delivered by its claim (claims.py).

A routing error after the claim committed (OBX-8) goes through the same
failure policy as a receiver failure; a lease is never stranded.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field

from scheduler.kinds import HeadPriority, Lane
from scheduler.loop import Tick
from scheduler.outbox import claims, delivery
from scheduler.redaction import launch_secrets, redact_text

logger = logging.getLogger("scheduler.drain")
# Runs leased in one claim transaction; their prefixes are delivered together.
RUNS_PER_CLAIM = 16
# Ready runs read per listing: four claim-sized slices for concurrent drainers.
CANDIDATES = 4 * RUNS_PER_CLAIM


@dataclass
class DrainTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "delivered": 0, "retried": 0, "failed_heads": 0, "released": 0})
    # The listing was full or the batch ran out: more may be ready behind what this tick claimed.
    more: bool = False

    def as_tick(self) -> Tick:
        """Batch was full, go again (as River's services do); otherwise the loop arms its wake signal, looks once
        more and waits: a short listing already showed everything that was ready."""
        return Tick(self.counts, again=self.counts["claimed"] > 0 and self.more)


def run_once(lease_owner: str, *, lane: Lane = Lane.LEDGER, head_priority: HeadPriority = HeadPriority.ADMISSION_FIRST,
             batch: int = 50, max_attempts: int = 10, lease_seconds: float = 30.0, backoff_base_ms: float = 500.0,
             should_stop=lambda: False) -> DrainTick:
    result = DrainTick()
    candidates: list[str] = []
    listed, listing_full = False, False
    empty_rounds = 0
    while result.counts["claimed"] < batch and not should_stop():
        if not candidates:
            if listed and not listing_full:
                break  # the last listing held everything ready then; what came since is the next tick's
            candidates = _own_slice_first(
                [row["run_id"] for row in claims.list_ready_runs(lane, head_priority, CANDIDATES)], lease_owner)
            listed, listing_full = True, len(candidates) >= CANDIDATES
            continue
        locked: list[str] = []
        prefixes = claims.lease_prefixes(candidates, lane, lease_owner, lease_seconds,
                                         max_runs=min(RUNS_PER_CLAIM, batch - result.counts["claimed"]),
                                         locked_out=locked)
        # Every run this claim locked is done with for this listing, those found already delivered included:
        # left in place they would be locked again first, and a listing's later runs never reached.
        done = set(locked)
        candidates = [run_id for run_id in candidates if run_id not in done]
        if not prefixes and locked and candidates:
            continue  # what it locked was drained meanwhile; the listing's later runs are next
        if not prefixes:
            # Every candidate was held by another drainer or already drained.
            # Re-read the order once; after that, yield instead of spinning.
            empty_rounds += 1
            if empty_rounds >= 2:
                break
            candidates = []
            continue
        empty_rounds = 0
        # OBX-6 continuation: runs whose prefix was full go again, before new candidates.
        while prefixes and not should_stop():
            result.counts["claimed"] += len(prefixes)
            full = [outcome.prefix.run_id for outcome in _deliver(prefixes, lease_owner, lease_seconds)
                    if _settle(outcome, result, max_attempts, backoff_base_ms)
                    and len(outcome.prefix.facts) == claims.MAX_PREFIX]
            if not full or result.counts["claimed"] >= batch:
                break
            prefixes = claims.lease_prefixes(full, lane, lease_owner, lease_seconds, max_runs=len(full))
    result.more = listing_full or result.counts["claimed"] >= batch
    return result


def _deliver(prefixes: list[claims.Prefix], lease_owner: str, lease_seconds: float) -> list[delivery.Outcome]:
    """Deliver; while a prefix goes to an external receiver (HTTP, slow at worst), its leases are kept alive."""
    leased = [prefix for prefix in prefixes if prefix.acknowledged_in_place is None]
    if not any(delivery.goes_over_http(prefix) for prefix in leased):
        return delivery.deliver_all(prefixes)
    with claims.leases_kept(lease_owner, [fact_id for prefix in leased for fact_id in prefix.fact_ids], lease_seconds):
        return delivery.deliver_all(prefixes)


def _own_slice_first(candidates: list[str], lease_owner: str) -> list[str]:
    """Rotate the ordered candidates so concurrent drainers start on different slices.

    Every drainer reads the same order; without this they all lock and lease
    the same first runs and all but one find them taken. The order within the
    window is a preference, so rotating it keeps each run's causal order and
    the window's priority classes intact.
    """
    if len(candidates) <= RUNS_PER_CLAIM:
        return candidates
    slices = max(1, len(candidates) // RUNS_PER_CLAIM)
    start = (zlib.crc32(lease_owner.encode()) % slices) * RUNS_PER_CLAIM
    return candidates[start:] + candidates[:start]


def _settle(outcome: delivery.Outcome, result: DrainTick, max_attempts: int, backoff_base_ms: float) -> bool:
    """Count a delivered prefix, or fail its head through the policy; True when delivered."""
    prefix = outcome.prefix
    if outcome.error is None:
        result.counts["delivered"] += outcome.acknowledged
        result.counts["released"] += outcome.released
        return True
    message = redact_text(f"{type(outcome.error).__name__}: {outcome.error}", launch_secrets(prefix.dispatch_launch))
    result.counts["delivered"] += outcome.acknowledged  # a partial delivery's facts that did arrive
    if claims.fail(outcome.failed_from or prefix, message, max_attempts, backoff_base_ms):
        result.counts["failed_heads"] += 1
        logger.warning("drain run=%s head=%s failed for good: %s", prefix.run_id,
                       (outcome.failed_from or prefix).head.event_id, message)
    else:
        result.counts["retried"] += 1
    return False
