"""The claim (RUN-2, FSH-1..8): queued runs become attempts with fresh leases, in each org's turn and within its
limits, every rule decided in scheduler/sql/claim.sql.

Orgs nobody counts (no cap, start rate or keyed run: the usual case) are claimed in one statement, which chooses
the orgs in their turn. The counted orgs it chose keep their share of the batch and their place in the turn
(FSH-4), and the counted claim serves exactly them: two statements in one transaction, the second's snapshot after
the first's locks, so no two claimers both take an org's last slot. When one org alone has due runs and nobody
counts it (the queue's usual shape), a lighter statement claims without the turn's reads; it says when the queue
is not of that shape, and the full claim runs instead.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from scheduler import db
from scheduler.conf import scheduler_settings

@dataclass(frozen=True)
class Claim:
    run_id: str
    attempt: int
    lease_token: str
    lease_expires_at: dt.datetime
    org_id: str | None
    play_name: str
    input: Any
    launch: dict


class Claims(list):
    """The runs one claim took, and whether the queue may hold more for an immediate next claim."""

    more: bool = False
    # The claim chose orgs nobody counts and took none of their runs: each was locked (SKIP LOCKED), most often by
    # a drainer delivering its run.created (OBX-5) for a millisecond or two, or by another dispatcher's claim.
    skipped: bool = False


def _claims(rows: list[dict]) -> list[Claim]:
    return [Claim(r["run_id"], r["attempt"], r["lease_token"], r["lease_expires_at"], r["org_id"], r["play_name"],
                  r["input_json"], r["launch_json"] or {}) for r in rows]


def _claim_counted(orgs: list[str], limit: int, lease_seconds: float, default_cap: int | None,
                   take_turns: bool, now_pass: float) -> list[Claim]:
    """The claim of the counted orgs the free claim chose: their locks, then the claim on a snapshot after them."""
    with transaction.atomic():
        db.fetch_all("runs_claim_lock_orgs", {"orgs": orgs})
        rows = db.fetch_all("runs_claim_queued", {
            "limit": limit, "lease_seconds": lease_seconds, "default_max_active": default_cap,
            "orgs": orgs, "take_turns": take_turns, "now_pass": now_pass,
        })
    return _claims(rows)


class _QueueShape:
    """Whether this process's last claim saw one uncounted org alone: the sole claim is tried only then, so a queue
    of many orgs (or a counted one) does not pay for a refused statement on every claim. Advisory: threads may
    race on it, and either claim is right whatever it says."""

    sole = True


def _claim_rows(limit: int, lease_seconds: float, default_cap: int | None) -> list[dict]:
    """The rows of the sole claim when it serves this queue, else of the full free claim; the last row says what it
    chose."""
    params = {"limit": limit, "lease_seconds": lease_seconds, "default_max_active": default_cap}
    if _QueueShape.sole and default_cap is None:
        rows = db.fetch_all("runs_claim_queued_sole", params)
        if rows[-1]["open_orgs"] is not None:
            return rows
    rows = db.fetch_all("runs_claim_queued_free", params)
    _QueueShape.sole = rows[-1]["open_orgs"] <= 1 and not rows[-1]["counted_orgs"]
    return rows


def claim_queued_runs(limit: int = 1, lease_seconds: float | None = None) -> Claims:
    """Claim up to `limit` queued runs, each as a new attempt with a fresh lease (see the module's docstring)."""
    default_cap = scheduler_settings.org_max_active
    lease_seconds = lease_seconds or scheduler_settings.claim_lease_seconds
    rows = _claim_rows(limit, lease_seconds, default_cap)
    meta = rows.pop()  # the last row says what the statement chose, not a claim
    claims = Claims(_claims(rows))
    open_orgs, chosen = meta["open_orgs"], meta["chosen_orgs"]
    if meta["counted_orgs"] and len(claims) < limit:
        # FSH-4: the free claim left the counted orgs it chose their share of the batch; they take it here.
        claims.extend(_claim_counted(meta["counted_orgs"], limit - len(claims), lease_seconds, default_cap,
                                     open_orgs > 1, meta["now_pass"]))
    # Go again at once when the batch was full, when more orgs wait than one claim considers, or when an org
    # gave its whole share of a batch split between orgs (it may hold more).
    share = -(-limit // max(chosen, 1))
    taken: dict[str, int] = {}
    for claim in claims:
        taken[claim.org_id or ""] = taken.get(claim.org_id or "", 0) + 1
    claims.more = len(claims) >= limit or open_orgs > chosen or (chosen > 1 and share in taken.values())
    claims.skipped = not claims and chosen > len(meta["counted_orgs"] or [])
    return claims
