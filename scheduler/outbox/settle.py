"""Stage 4, settle (OBX-6, OBX-9): what a delivery's outcome does to the leases it held.

Facts an external receiver took are acknowledged (only those this drainer
still holds); the facts a route left for the next claim are returned; a
failed delivery counts an attempt on the first fact that did not arrive,
backs off, and past the maximum marks that head failed, which blocks its
run's lane until an operator requeues it. Nothing here calls back into an
earlier stage.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from scheduler import db
from scheduler.faults import backoff_ms
from scheduler.outbox.facts import Prefix
from scheduler.outbox.receivers.interface import Outcome
from scheduler.redaction import launch_secrets, redact_text

logger = logging.getLogger("scheduler.drain")

BACKOFF_CAP_MS = 300_000.0


@dataclass(frozen=True)
class FailurePolicy:
    max_attempts: int
    backoff_base_ms: float


def settle_all(outcomes: list[Outcome], policy: FailurePolicy, counts: dict[str, int]) -> list[bool]:
    """Settle one claim's outcomes: the facts every receiver took acknowledged in ONE statement (issue 47: a claim
    of five runs was five acknowledging commits), each fenced on the lease, then each outcome's releases and
    failure; True for each outcome whose prefix was all delivered."""
    delivered = [fact.event_id for outcome in outcomes for fact in outcome.delivered]
    # A claim's prefixes were all leased by its drainer: one lease owner.
    acknowledged = acknowledge(outcomes[0].prefix.lease_owner, delivered) if delivered else set()
    return [_settle(outcome, policy, counts, acknowledged) for outcome in outcomes]


def _settle(outcome: Outcome, policy: FailurePolicy, counts: dict[str, int], acknowledged: set[str]) -> bool:
    """Count what of the outcome was acknowledged, release and fail as it says; True when all was delivered."""
    prefix = outcome.prefix
    counts["delivered"] += outcome.acknowledged + sum(1 for fact in outcome.delivered if fact.event_id in acknowledged)
    if outcome.error is None:
        if prefix.route.released:
            counts["released"] += release(prefix.lease_owner, [fact.event_id for fact in prefix.route.released])
        return True
    message = redact_text(f"{type(outcome.error).__name__}: {outcome.error}", launch_secrets(prefix.dispatch_launch))
    failed = replace(prefix, facts=prefix.facts[len(outcome.delivered):])
    if fail(failed, message, policy):
        counts["failed_heads"] += 1
        logger.warning("drain run=%s head=%s failed for good: %s", prefix.run_id, failed.head.event_id, message)
    else:
        counts["retried"] += 1
    return False


def acknowledge(lease_owner: str, fact_ids: list[str]) -> set[str]:
    """OBX-6: acknowledge the facts of `fact_ids` this drainer still holds; returns those acknowledged."""
    return {row["event_id"] for row in db.fetch_all("outbox_ack", {"event_ids": fact_ids, "lease_owner": lease_owner})}


def fail(prefix: Prefix, error: str, policy: FailurePolicy) -> bool:
    """OBX-6: count an attempt on the head, back off, mark it failed past the maximum; returns failed."""
    row = db.fetch_one("outbox_fail_prefix", {
        "head_event_id": prefix.head.event_id, "event_ids": prefix.fact_ids, "lease_owner": prefix.lease_owner,
        "error": error[:2000], "max_attempts": policy.max_attempts,
        "backoff_ms": backoff_ms(prefix.head.attempt_count, policy.backoff_base_ms, BACKOFF_CAP_MS),
    })
    return bool(row["failed"])


def release(lease_owner: str, fact_ids: list[str]) -> int:
    """Return leases without counting an attempt (a route that stopped before a terminal bound elsewhere)."""
    return len(db.fetch_all("outbox_release_facts", {"event_ids": fact_ids, "lease_owner": lease_owner}))


def release_all(lease_owner: str) -> int:
    """OBX-9: a stopping drainer returns every lease it holds; its facts are claimable at once."""
    return len(db.fetch_all("outbox_release_leases", {"lease_owner": lease_owner}))


def requeue_failed_head(event_id: str) -> bool:
    """Operator repair (OBX-2): a failed head becomes deliverable again, unblocking its run's lane."""
    return bool(db.fetch_all("outbox_requeue_failed_head", {"event_id": event_id}))
