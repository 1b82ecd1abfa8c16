"""The billing sweep (BIL-1): finalize due compute billing jobs."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from scheduler import messages
from scheduler.cleanup import billing
from scheduler.tick import Tick

logger = logging.getLogger("scheduler.billing")


@dataclass
class BillingTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "finalized": 0, "waiting": 0, "billed": 0})

    def as_tick(self, limit: int) -> Tick:
        return Tick(self.counts, again=self.counts["claimed"] >= limit)


def run_once(lease_owner: str, limit: int = 20, now=None) -> BillingTick:
    result = BillingTick()
    # Issue 47: the tick's jobs are locked and finalized in one statement (one commit, no lease written between).
    rows = billing.finalize_due(lease_owner, limit, now)
    result.counts["claimed"] = len(rows)
    for row in rows:
        result.counts["billed"] += row["items_written"]
        if row["status"] == "finalized":
            result.counts["finalized"] += 1
        else:
            result.counts["waiting"] += 1
            logger.info("billing run=%s: %s", row["run_id"], messages.LATE_BILLING_WAITING)
    return result
