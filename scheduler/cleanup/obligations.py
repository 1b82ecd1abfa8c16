"""Sandbox cleanup obligations (CLN-2..7): adopt legacy rows, claim, record, complete, fail, unblock.

Deleted v2 rows are tombstones, the durable fact that a sandbox is gone, so
adoption is idempotent: running it twice changes nothing.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from scheduler import db, messages
from scheduler.errors import InvalidInput
from scheduler.faults import backoff_ms


@dataclass(frozen=True)
class Job:
    provider: str
    sandbox_id: str
    run_id: str
    attempt: int
    environment: str
    routing_domain: str | None
    attempt_count: int
    failure_count: int
    delete_accepted: bool = False  # the claim saw the provider's acceptance of this job's delete (CLN-5)

    def identity(self) -> dict:
        return {"provider": self.provider, "sandbox_id": self.sandbox_id, "run_id": self.run_id,
                "attempt": self.attempt, "routing_domain": self.routing_domain}

    def event_id(self, event_type: str) -> str:
        """CLN-5: the id of one of this job's cleanup events; the confirmation is one per attempt, the others unique."""
        if event_type == "provider_delete_confirmed":
            return f"{self.provider}:{self.sandbox_id}:{self.run_id}:{self.attempt}:{event_type}"
        return f"{self.provider}:{self.sandbox_id}:{event_type}:{uuid.uuid4().hex}"


def adoption_pending() -> bool:
    """CLN-2: the cheap preflight must return a boolean proof."""
    pending = db.fetch_value("sandbox_cleanup_adoption_preflight")
    if not isinstance(pending, bool):
        raise RuntimeError(messages.ADOPTION_PREFLIGHT_NO_PROOF)
    return pending


def adopt() -> dict:
    """CLN-3 in one statement."""
    return db.fetch_one("sandbox_cleanup_adopt")


def claim(providers: list[str], lease_owner: str, limit: int = 20, lease_seconds: float = 120.0, now=None) -> tuple[list[Job], dict | None]:
    """CLN-2/CLN-4: preflight, adoption only when needed, then the provider-qualified claim."""
    if not providers:
        return [], None
    adopted = adopt() if adoption_pending() else None
    rows = db.fetch_all("sandbox_cleanup_claim", {
        "providers": list(providers), "lease_owner": lease_owner, "limit": limit, "lease_seconds": lease_seconds, "now": now,
    })
    return [Job(**row) for row in rows], adopted


def record_event(job: Job, event_type: str, details: dict) -> None:
    db.run("sandbox_cleanup_record_event", {
        **job.identity(), "event_id": job.event_id(event_type),
        "event_type": event_type, "details": json.dumps(details),
    })


@dataclass(frozen=True)
class Acceptance:
    """CLN-5: when the provider first took the delete (epoch ms) and for which organization."""

    accepted_at_ms: float
    organization_id: str | None


def read_acceptance(identity: dict) -> Acceptance | None:
    """CLN-5: the first acceptance of a job's delete (by its identity: provider, sandbox, run, attempt, routing
    domain), or None; readable between claims (the admin's cleanup page shows it)."""
    row = db.fetch_one("sandbox_cleanup_read_acceptance", identity)
    return None if row is None else Acceptance(float(row["accepted_at_ms"]), row["organization_id"])


@dataclass(frozen=True)
class Completion:
    """A job whose sandbox the provider confirmed gone: how (deleted, already_absent) and the domain it named."""

    job: Job
    provider_outcome: str
    observed_routing_domain: str | None = None


def _batch_columns(jobs: list[Job], what: str) -> dict[str, list]:
    """The jobs' identities as the array parameters of a batch statement; a batch names each job once."""
    if len({(job.provider, job.sandbox_id, job.run_id, job.attempt, job.routing_domain) for job in jobs}) != len(jobs):
        raise InvalidInput(f"{what} batch names each job once")
    return {"providers": [job.provider for job in jobs], "sandbox_ids": [job.sandbox_id for job in jobs],
            "run_ids": [job.run_id for job in jobs], "attempts": [job.attempt for job in jobs],
            "routing_domains": [job.routing_domain for job in jobs]}


def complete_all(completions: list[Completion], lease_owner: str) -> list[str]:
    """CLN-6 for many jobs in ONE statement, each fenced on its own; one outcome per job, in order: completed,
    already_deleted, lease_lost, missing_obligation or wrong_routing_domain."""
    if not completions:
        return []
    jobs = [item.job for item in completions]
    rows = db.fetch_all("sandbox_cleanup_complete", {
        **_batch_columns(jobs, "a completion"),
        "provider_outcomes": [item.provider_outcome for item in completions],
        "observed_routing_domains": [item.observed_routing_domain for item in completions],
        "event_ids": [job.event_id("provider_delete_confirmed") for job in jobs], "lease_owner": lease_owner,
    })
    return [row["outcome"] for row in rows]


def complete(job: Job, lease_owner: str, provider_outcome: str, observed_routing_domain: str | None = None) -> str:
    """CLN-6 for one job: completed, already_deleted, lease_lost, missing_obligation or wrong_routing_domain."""
    return complete_all([Completion(job, provider_outcome, observed_routing_domain)], lease_owner)[0]


BACKOFF_CAP_MS = 3_600_000.0


def fail(job: Job, lease_owner: str, error: str, *, permanent: bool, max_failures: int = 8, base_ms: float = 5_000.0,
         retry_after_s: float | None = None) -> str | None:
    """CLN-7: back off (never sooner than a provider's Retry-After), or block with the reason."""
    delay_ms = backoff_ms(job.failure_count, base_ms, BACKOFF_CAP_MS)
    if retry_after_s is not None:
        delay_ms = max(delay_ms, min(BACKOFF_CAP_MS, retry_after_s * 1000.0))
    return db.fetch_value("sandbox_cleanup_fail", {
        **job.identity(), "lease_owner": lease_owner, "error": error[:1000], "permanent": permanent,
        "max_failures": max_failures, "backoff_ms": delay_ms,
    })


def accepted_look_later(jobs: list[Job], lease_owner: str, delay_ms: float) -> list[bool]:
    """CLN-5: the provider accepted these jobs' deletes (the acceptances that arrived together); read each back
    after `delay_ms`. One statement records every acceptance and returns each lease still held; per job, in
    order, False when its lease was lost meanwhile (its acceptance is recorded all the same)."""
    if not jobs:
        return []
    rows = db.fetch_all("sandbox_cleanup_accepted_look_later", {
        **_batch_columns(jobs, "an acceptance"),
        "event_ids": [job.event_id("provider_delete_accepted") for job in jobs],
        "details": [json.dumps({"routingDomain": job.routing_domain}) for job in jobs],
        "lease_owner": lease_owner, "delay_ms": delay_ms})
    return [bool(row["looks_later"]) for row in rows]


def retry_later(job: Job, lease_owner: str, delay_ms: float) -> None:
    db.run("sandbox_cleanup_retry_later", {**job.identity(), "lease_owner": lease_owner, "delay_ms": delay_ms})


def unblock(provider: str, sandbox_id: str, routing_domain: str | None) -> bool:
    return bool(db.fetch_all("sandbox_cleanup_unblock",
                             {"provider": provider, "sandbox_id": sandbox_id, "routing_domain": routing_domain}))
