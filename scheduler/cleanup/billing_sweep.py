"""The billing sweep (BIL-1): finalize due compute billing jobs."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.cleanup import billing
from scheduler.loop import Tick


@dataclass
class BillingTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "finalized": 0, "waiting": 0, "billed": 0})

    def as_tick(self, limit: int) -> Tick:
        return Tick(self.counts, again=self.counts["claimed"] >= limit)


def run_once(lease_owner: str, limit: int = 20, now=None) -> BillingTick:
    result = BillingTick()
    for run_id in billing.claim(lease_owner, limit, now):
        result.counts["claimed"] += 1
        row = billing.finalize(run_id, lease_owner, now)
        result.counts["billed"] += row["items_written"]
        result.counts["finalized" if row["status"] == "finalized" else "waiting"] += 1
    return result
