"""Drain the outbox (OBX-6, OBX-9): claim a prefix, deliver it outside any transaction, settle the lease.

A routing error after the claim committed (OBX-8) goes through the same
failure policy as a receiver failure; a lease is never stranded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from scheduler import delivery, outbox
from scheduler.redaction import redact_text

logger = logging.getLogger("scheduler.drain")


@dataclass
class DrainResult:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "delivered": 0, "retried": 0, "failed_heads": 0, "released": 0})


def run_once(lease_owner: str, *, lane: str = "ledger", head_priority: str = "admission_first", batch: int = 50,
             max_attempts: int = 10, lease_seconds: float = 30.0, backoff_base_ms: float = 500.0,
             should_stop=lambda: False) -> DrainResult:
    result = DrainResult()
    candidates: list[str] = []
    listed_empty = False
    while result.counts["claimed"] < batch and not should_stop():
        if not candidates:
            if listed_empty:
                break
            candidates = [row["run_id"] for row in outbox.list_ready_runs(lane, head_priority, 16)]
            listed_empty = not candidates
            continue
        prefix = outbox.claim_run(candidates, lane, lease_owner, lease_seconds)
        if prefix is None:
            candidates = []  # every candidate was held or drained: read the order again
            continue
        candidates.remove(prefix.run_id)
        # OBX-6 continuation: after a full prefix, the same run's next one.
        while prefix is not None and result.counts["claimed"] < batch:
            result.counts["claimed"] += 1
            if not _deliver(prefix, result, max_attempts, backoff_base_ms) or len(prefix.facts) < outbox.MAX_PREFIX:
                break
            prefix = outbox.claim_run([prefix.run_id], lane, lease_owner, lease_seconds)
    return result


def _deliver(prefix: outbox.Prefix, result: DrainResult, max_attempts: int, backoff_base_ms: float) -> bool:
    try:
        acknowledged, released = delivery.deliver(prefix)
    except Exception as error:  # noqa: BLE001 - every failure is settled through the policy
        message = redact_text(f"{type(error).__name__}: {error}", _secrets(prefix))
        if outbox.fail(prefix, message, max_attempts, backoff_base_ms):
            result.counts["failed_heads"] += 1
            logger.warning("drain run=%s head=%s failed for good: %s", prefix.run_id, prefix.head.event_id, message)
        else:
            result.counts["retried"] += 1
        return False
    result.counts["delivered"] += acknowledged
    result.counts["released"] += released
    return True


def _secrets(prefix: outbox.Prefix) -> list[str]:
    return [value for key, value in (prefix.dispatch_launch or {}).items() if "token" in key.lower() and isinstance(value, str)]
