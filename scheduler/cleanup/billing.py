"""Compute billing (BIL-1): finalize a terminal run's runtime resources into billing items."""

from __future__ import annotations

from scheduler import db
from scheduler.conf import scheduler_settings

TERMINAL_GRACE_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 3600

# A job waiting for a late resource's cleanup looks again at least this often (see compute_billing_finalize_due).
WAITING_RECHECK_SECONDS = 30


def finalize_due(lease_owner: str, limit: int = 20, now=None) -> list[dict]:
    """One statement: lock up to `limit` due jobs no live lease holds and finalize them, each on its own (items
    idempotent by adjustment id; late resources wait or are capped). One row per locked job, by run id; status None
    when its run is not terminal (the job is then leased to `lease_owner` for SCHEDULER_BILLING_LEASE_SECONDS)."""
    return db.fetch_all("compute_billing_finalize_due", {
        "lease_owner": lease_owner, "limit": limit, "now": now,
        "lease_seconds": scheduler_settings.billing_lease_seconds,
        "grace_seconds": TERMINAL_GRACE_SECONDS, "default_timeout_seconds": DEFAULT_TIMEOUT_SECONDS,
        "recheck_seconds": WAITING_RECHECK_SECONDS,
    })
