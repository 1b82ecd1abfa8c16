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
    for _ in range(batch):
        if should_stop():
            break
        prefix = outbox.claim_prefix(lane, lease_owner, head_priority, lease_seconds)
        if prefix is None:
            break
        result.counts["claimed"] += 1
        try:
            acknowledged, released = delivery.deliver(prefix)
        except Exception as error:  # noqa: BLE001 - every failure is settled through the policy
            message = redact_text(f"{type(error).__name__}: {error}", _secrets(prefix))
            if outbox.fail(prefix, message, max_attempts, backoff_base_ms):
                result.counts["failed_heads"] += 1
                logger.warning("drain run=%s head=%s failed for good: %s", prefix.run_id, prefix.head.event_id, message)
            else:
                result.counts["retried"] += 1
            continue
        result.counts["delivered"] += acknowledged
        result.counts["released"] += released
    return result


def _secrets(prefix: outbox.Prefix) -> list[str]:
    return [value for key, value in (prefix.dispatch_launch or {}).items() if "token" in key.lower() and isinstance(value, str)]
