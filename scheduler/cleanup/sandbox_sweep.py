"""The sandbox cleanup sweep (CLN-2..7): delete each obligation's sandbox and confirm it.

1. Claim (preflight, adoption when needed, provider-qualified claim); the
   claim also says whether the provider already accepted the job's delete,
   and records provider_delete_requested for each job it has not.
2. If the provider has not accepted a delete yet: call delete, record
   accepted (or failed: back off or block). A provider whose deletes finish
   later (Daytona) is read back at the next look, due after the delay, in the
   same statement that recorded the acceptance.
3. Read back; deleted (or already absent) -> complete at the first
   acceptance time, the tick's confirmations in one statement; still
   present -> look again later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import DatabaseError

from scheduler import observability
from scheduler.faults import describe
from scheduler.cleanup import obligations
from scheduler.conf import scheduler_settings
from scheduler.kinds import CleanupStatus
from scheduler.tick import Tick
from scheduler.providers import DeleteOutcome, ProviderError, ReadBack, SandboxRef, get_provider

logger = logging.getLogger("scheduler.sweep.cleanup")


@dataclass
class CleanupTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "accepted": 0, "confirmed": 0, "blocked": 0,
                                                  "retried": 0, "adopted": 0})

    def as_tick(self, limit: int) -> Tick:
        return Tick(self.counts, again=self.counts["claimed"] >= limit)


def run_once(providers: list[str], lease_owner: str, limit: int = 20, now=None, readback_delay_ms: float = 2_000.0,
             provider_for=get_provider) -> CleanupTick:
    result = CleanupTick()
    jobs, adopted = obligations.claim(providers, lease_owner, limit, scheduler_settings.cleanup_lease_seconds, now=now)
    if adopted:
        result.counts["adopted"] = adopted["copied"] + adopted["settled_legacy"] + adopted["settled_duplicates"]
    result.counts["claimed"] = len(jobs)
    confirmed: list[obligations.Completion] = []
    for job in jobs:
        handle(job, lease_owner, result, readback_delay_ms, provider_for, confirmed)
    complete(confirmed, lease_owner, result)
    return result


def complete(confirmed: list[obligations.Completion], lease_owner: str, result: CleanupTick) -> None:
    """CLN-6 for the tick's confirmed deletes in one statement (issue 47); should the batch fail, each on its own,
    so one job's fault leaves the others completed."""
    try:
        outcomes = obligations.complete_all(confirmed, lease_owner)
    except DatabaseError as error:
        logger.warning("cleanup: completing %d jobs together failed (%s); completing each alone", len(confirmed),
                       describe(error))
        outcomes = [_complete_alone(item, lease_owner) for item in confirmed]
    for item, outcome in zip(confirmed, outcomes):
        if outcome == "completed":
            result.counts["confirmed"] += 1
        logger.info("cleanup %s %s: %s (%s)", item.job.provider, item.job.sandbox_id, outcome, item.provider_outcome)


def _complete_alone(item: obligations.Completion, lease_owner: str) -> str:
    try:
        return obligations.complete_all([item], lease_owner)[0]
    except DatabaseError as error:  # its lease expires and a later tick reads it back again
        logger.warning("cleanup %s %s: completion failed: %s", item.job.provider, item.job.sandbox_id, describe(error))
        return "failed"


def handle(job: obligations.Job, lease_owner: str, result: CleanupTick, readback_delay_ms: float, provider_for,
           confirmed: list[obligations.Completion]) -> None:
    ref = SandboxRef(job.provider, job.sandbox_id, job.routing_domain)
    try:
        provider = provider_for(job.provider)
        if not job.delete_accepted:
            with observability.CLEANUP_DELETE_SECONDS.labels(job.provider).time():
                outcome = provider.delete(ref)
            if outcome is DeleteOutcome.ALREADY_ABSENT:
                confirmed.append(_confirmation(job, "already_absent", provider.seen_domain(ref)))
                return
            result.counts["accepted"] += 1
            if not provider.delete_done_when_accepted:
                obligations.accepted_look_later(job, lease_owner, readback_delay_ms)
                result.counts["retried"] += 1
                return
            obligations.record_event(job, "provider_delete_accepted", {"routingDomain": job.routing_domain})
        seen = provider.read_back(ref)
    except ProviderError as error:
        obligations.record_event(job, "provider_delete_failed", {"routingDomain": job.routing_domain, "error": str(error)[:500],
                                                             "permanent": error.permanent})
        status = obligations.fail(job, lease_owner, str(error), permanent=error.permanent,
                                  retry_after_s=error.retry_after)
        result.counts["blocked" if status == CleanupStatus.BLOCKED else "retried"] += 1
        logger.warning("cleanup %s %s: %s (%s)", job.provider, job.sandbox_id, error, status)
        return
    if seen is ReadBack.DELETED:
        confirmed.append(_confirmation(job, "deleted", provider.seen_domain(ref)))
    else:
        obligations.retry_later(job, lease_owner, readback_delay_ms)
        result.counts["retried"] += 1


def _confirmation(job: obligations.Job, provider_outcome: str, seen_domain: str | None) -> obligations.Completion:
    """CLN-6; the observed routing domain is the one the provider's answer named, else the job's own."""
    return obligations.Completion(job, provider_outcome, seen_domain or job.routing_domain)
