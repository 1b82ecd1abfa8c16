"""Compute billing (BIL-1): finalize a terminal run's runtime resources into billing items."""

from __future__ import annotations

from scheduler import db
from scheduler.conf import scheduler_settings

TERMINAL_GRACE_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 3600


def claim(lease_owner: str, limit: int = 20, now=None) -> list[str]:
    """Lease due jobs for SCHEDULER_BILLING_LEASE_SECONDS: a worker killed holding them leaves them to another then."""
    return [row["run_id"] for row in db.fetch_all("compute_billing_claim", {
        "lease_owner": lease_owner, "limit": limit, "now": now,
        "lease_seconds": scheduler_settings.billing_lease_seconds,
    })]


# A job waiting for a late resource's cleanup looks again at least this often (see compute_billing_finalize).
WAITING_RECHECK_SECONDS = 30


def finalize_all(run_ids: list[str], lease_owner: str, now=None) -> list[dict]:
    """One statement for the jobs this worker leased, each fenced on its own: items idempotent by adjustment id;
    late resources wait or are capped. One row per run id, in order (status None: not this worker's to finalize)."""
    if not run_ids:
        return []
    return db.fetch_all("compute_billing_finalize", {
        "run_ids": run_ids, "lease_owner": lease_owner, "now": now,
        "grace_seconds": TERMINAL_GRACE_SECONDS, "default_timeout_seconds": DEFAULT_TIMEOUT_SECONDS,
        "recheck_seconds": WAITING_RECHECK_SECONDS,
    })


def finalize(run_id: str, lease_owner: str, now=None) -> dict:
    """finalize_all for one job."""
    return finalize_all([run_id], lease_owner, now)[0]
