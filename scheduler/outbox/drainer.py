"""Drain the outbox (OBX-6, OBX-9): a short loop over the stages, each one module, data flowing one way.

    claims.claim    lock the listed runs, read or lease each one's causal prefix
    routing.route   decide each prefix's receiver once, recorded on the prefix
    receivers       deliver: in this database inside the claim's transaction,
                    elsewhere after it commits
    settle          acknowledge, release, or fail the head through the policy

A routing error (OBX-8) is an outcome like a receiver's failure, so it goes
through the same failure policy; a lease is never stranded.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field

from scheduler.faults import describe
from scheduler.kinds import HeadPriority, Lane
from scheduler.outbox import claims, receivers, routing, settle
from scheduler.outbox.facts import Prefix
from scheduler.outbox.receivers.interface import STORE_ERRORS, Outcome
from scheduler.tick import Tick

logger = logging.getLogger("scheduler.drain")
# Runs leased in one claim transaction; their prefixes are delivered together.
RUNS_PER_CLAIM = 16
# Ready runs read per listing: four claim-sized slices for concurrent drainers.
CANDIDATES = 4 * RUNS_PER_CLAIM


@dataclass(frozen=True)
class DrainOptions:
    """A drainer's knobs and their defaults (drain_outbox's flags take these defaults too)."""

    lane: Lane = Lane.LEDGER
    head_priority: HeadPriority = HeadPriority.ADMISSION_FIRST
    batch: int = 50  # prefixes per tick
    max_attempts: int = 10  # delivery attempts before a head is failed
    lease_seconds: float = 30.0
    backoff_base_ms: float = 500.0


@dataclass
class DrainTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "delivered": 0, "retried": 0, "failed_heads": 0, "released": 0})
    # The listing was full or the batch ran out: more may be ready behind what this tick claimed.
    more: bool = False

    def as_tick(self) -> Tick:
        """Batch was full, go again (as River's services do); otherwise the loop arms its wake signal, looks once
        more and waits: a short listing already showed everything that was ready. A tick that delivered some is
        partial: a loop with a cooldown looks again after it instead, taking what came meanwhile together."""
        claimed = self.counts["claimed"] > 0
        return Tick(self.counts, again=claimed and self.more, partial=claimed and not self.more)


def run_once(lease_owner: str, *, should_stop=lambda: False, **overrides) -> DrainTick:
    """One tick: list ready runs, then claim, deliver and settle slices of them until the batch is spent."""
    options = DrainOptions(**overrides)
    result = DrainTick()
    candidates: list[str] = []
    listed, listing_full, empty_rounds = False, False, 0
    while result.counts["claimed"] < options.batch and not should_stop():
        if not candidates:
            if listed and not listing_full:
                break  # the last listing held everything ready then; what came since is the next tick's
            listing = claims.list_ready_runs(options.lane, options.head_priority, CANDIDATES)
            candidates = _own_slice_first(listing, lease_owner, options.head_priority)
            listed, listing_full = True, len(listing) >= CANDIDATES
            continue
        locked: list[str] = []
        full = _drain(candidates, lease_owner, options, result, locked)
        # Every run this claim locked is done with for this listing, those found already delivered included:
        # left in place they would be locked again first, and a listing's later runs never reached.
        done = set(locked)
        candidates = [run_id for run_id in candidates if run_id not in done]
        if full is None:
            if locked and candidates:
                continue  # what it locked was drained meanwhile; the listing's later runs are next
            # Every candidate was held by another drainer or already drained: re-read the order once, then yield.
            empty_rounds += 1
            if empty_rounds >= 2:
                break
            candidates = []
            continue
        empty_rounds = 0
        # OBX-6 continuation: runs whose prefix was full go again, before new candidates.
        while full and result.counts["claimed"] < options.batch and not should_stop():
            full = _drain(full, lease_owner, options, result) or []
    result.more = listing_full or result.counts["claimed"] >= options.batch
    if listed and not should_stop():
        # After this tick's deliveries, never before them: an outbox grown past its statistics is analyzed once.
        claims.analyze_outgrown_outbox(lease_owner)
    return result


def _drain(run_ids: list[str], lease_owner: str, options: DrainOptions, result: DrainTick,
           locked: list[str] | None = None) -> list[str] | None:
    """Claim, route, deliver and settle once; the runs whose full prefix was delivered, or None if none claimed."""
    here, leased = claim(run_ids, lease_owner, options, locked=locked,
                         max_runs=min(RUNS_PER_CLAIM, options.batch - result.counts["claimed"], len(run_ids)))
    outcomes = here + (receivers.deliver(leased) if leased else [])
    if not outcomes:
        return None
    result.counts["claimed"] += len(outcomes)
    policy = settle.FailurePolicy(options.max_attempts, options.backoff_base_ms)
    settled = settle.settle_all(outcomes, policy, result.counts)
    return [outcome.prefix.run_id for outcome, whole in zip(outcomes, settled)
            if whole and len(outcome.prefix.facts) == claims.MAX_PREFIX]


def claim(run_ids: list[str], lease_owner: str, options: DrainOptions, *, max_runs: int,
          locked: list[str] | None = None) -> tuple[list[Outcome], list[Prefix]]:
    """One claim, routed: (the outcomes of what it delivered inside its transaction, the prefixes it leased)."""
    here: list[Outcome] = []

    def deliver_here(read: list[Prefix]) -> list[Prefix]:
        """Inside the claim's transaction: route what was read, deliver what stays in this database."""
        local = [prefix for prefix in read if routing.route(prefix).in_place]
        if local:
            here.extend(receivers.deliver(local))
        return local

    lease = dict(lease_seconds=options.lease_seconds, max_runs=max_runs, locked_out=locked)
    try:
        leased = claims.claim(run_ids, options.lane, lease_owner, deliver_here=deliver_here, **lease)
    except STORE_ERRORS as error:
        # Delivering in place failed and rolled the claim back: lease instead, so the ordinary delivery meets the
        # same failure and the failure policy counts it on the head (a failed head an operator sees), never a loop.
        logger.warning("drain %s: delivering in place failed, leasing instead: %s", lease_owner, describe(error))
        here.clear()
        leased = claims.claim(run_ids, options.lane, lease_owner, **lease)
    for prefix in leased:
        if prefix.route is None:
            routing.route(prefix)
    return here, leased


def _own_slice_first(listing: list[dict], lease_owner: str, head_priority: HeadPriority) -> list[str]:
    """The listed run ids, the leading class rotated so concurrent drainers start on different slices of it.

    Every drainer reads the same order; without this they all lock the same
    first runs and all but one find them taken. Only the runs of the listing's
    first class rotate among themselves (in admission_first order; oldest_ready
    is one class), so a lower-class run is never claimed before a higher-class
    one (OBX-4), and each run's own facts keep their causal order whatever the
    order of runs.
    """
    def group(row: dict) -> int:
        return row["class"] if HeadPriority(head_priority) is HeadPriority.ADMISSION_FIRST else 0

    run_ids = [row["run_id"] for row in listing]
    leading = next((index for index, row in enumerate(listing) if group(row) != group(listing[0])), len(listing))
    if leading <= RUNS_PER_CLAIM:
        return run_ids
    slices = leading // RUNS_PER_CLAIM
    start = (zlib.crc32(lease_owner.encode()) % slices) * RUNS_PER_CLAIM
    return run_ids[start:leading] + run_ids[:start] + run_ids[leading:]
