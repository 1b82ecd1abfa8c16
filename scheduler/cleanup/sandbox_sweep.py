"""The sandbox cleanup sweep (CLN-2..7): delete each obligation's sandbox and confirm it.

1. Claim (preflight, adoption when needed, provider-qualified claim); the
   claim also says whether the provider already accepted the job's delete,
   and records provider_delete_requested for each job it has not.
2. If the provider has not accepted a delete yet: call delete, record
   accepted (or failed: back off or block). A provider whose deletes finish
   later (Daytona) is read back at the next look, due after the delay, in the
   same statement that recorded the acceptance: one statement for the
   acceptances that arrived together.
3. Read back; deleted (or already absent) -> complete at the first
   acceptance time, the tick's confirmations in one statement; still
   present -> look again later.

The provider calls of a tick run concurrently (provider_calls.py); what
each answer means is written on the tick's thread as it arrives, so an
acceptance is recorded as soon after the provider's answer as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import DatabaseError

from scheduler.faults import describe
from scheduler.cleanup import obligations, provider_calls
from scheduler.cleanup.provider_calls import Call
from scheduler.conf import scheduler_settings
from scheduler.kinds import CleanupStatus
from scheduler.tick import Tick
from scheduler.providers import DeleteOutcome, ProviderError, ReadBack, get_provider

logger = logging.getLogger("scheduler.sweep.cleanup")


@dataclass
class CleanupTick:
    counts: dict = field(default_factory=lambda: {"claimed": 0, "accepted": 0, "confirmed": 0, "blocked": 0,
                                                  "retried": 0, "adopted": 0})

    def as_tick(self, limit: int) -> Tick:
        return Tick(self.counts, again=self.counts["claimed"] >= limit)


def run_once(providers: list[str], lease_owner: str, limit: int = 20, now=None, readback_delay_ms: float = 2_000.0,
             provider_for=get_provider, concurrency: int | None = None) -> CleanupTick:
    """One tick: the provider calls of the claimed jobs run `concurrency` at a time (issue 47: a tick's time is
    the providers' latency), while every write is made here, on the tick's thread, as each answer arrives."""
    result = CleanupTick()
    jobs, adopted = obligations.claim(providers, lease_owner, limit, scheduler_settings.cleanup_lease_seconds, now=now)
    if adopted:
        result.counts["adopted"] = adopted["copied"] + adopted["settled_legacy"] + adopted["settled_duplicates"]
    result.counts["claimed"] = len(jobs)
    confirmed: list[obligations.Completion] = []
    calls = provider_calls.Calls(provider_for, scheduler_settings.cleanup_concurrency if concurrency is None
                                 else concurrency)
    for job in jobs:
        calls.ask(job, Call.READ_BACK if job.delete_accepted else Call.DELETE)
    for answers in calls.arrived():
        rest = record_finishing_later(answers, lease_owner, result, readback_delay_ms)
        for answer in rest:
            follow_up = record(answer, lease_owner, result, readback_delay_ms, confirmed)
            if follow_up is not None:
                calls.ask(answer.job, follow_up, next=True)
    complete(confirmed, lease_owner, result)
    return result


def record_finishing_later(answers: list[provider_calls.Answer], lease_owner: str, result: CleanupTick,
                           readback_delay_ms: float) -> list[provider_calls.Answer]:
    """CLN-5: the deletes accepted by a provider whose deletes finish later, among answers that arrived together,
    recorded in one statement (issue 47); returns the other answers."""
    later: list[provider_calls.Answer] = []
    rest: list[provider_calls.Answer] = []
    for answer in answers:
        finishes_later = answer.error is None and answer.outcome is DeleteOutcome.ACCEPTED and not answer.done_when_accepted
        (later if finishes_later else rest).append(answer)
    if later:
        obligations.accepted_look_later([answer.job for answer in later], lease_owner, readback_delay_ms)
        result.counts["accepted"] += len(later)
        result.counts["retried"] += len(later)
    return rest


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


def record(answer: provider_calls.Answer, lease_owner: str, result: CleanupTick, readback_delay_ms: float,
           confirmed: list[obligations.Completion]) -> Call | None:
    """What one provider answer means for its job, written at once; returns the call to make next, if any."""
    job = answer.job
    if answer.error is not None:
        _failed(job, answer.error, lease_owner, result)
        return None
    if answer.outcome is DeleteOutcome.ALREADY_ABSENT:
        confirmed.append(_confirmation(job, "already_absent", answer.seen_domain))
        return None
    if answer.outcome is DeleteOutcome.ACCEPTED:  # a provider done when it accepted (the others: record_finishing_later)
        result.counts["accepted"] += 1
        obligations.record_event(job, "provider_delete_accepted", {"routingDomain": job.routing_domain})
        return Call.READ_BACK
    if answer.outcome is ReadBack.DELETED:
        confirmed.append(_confirmation(job, "deleted", answer.seen_domain))
    else:
        obligations.retry_later(job, lease_owner, readback_delay_ms)
        result.counts["retried"] += 1
    return None


def _failed(job: obligations.Job, error: ProviderError, lease_owner: str, result: CleanupTick) -> None:
    """CLN-7: the failure recorded as an event, then a backoff or a block."""
    obligations.record_event(job, "provider_delete_failed", {"routingDomain": job.routing_domain,
                                                         "error": str(error)[:500], "permanent": error.permanent})
    status = obligations.fail(job, lease_owner, str(error), permanent=error.permanent, retry_after_s=error.retry_after)
    result.counts["blocked" if status == CleanupStatus.BLOCKED else "retried"] += 1
    logger.warning("cleanup %s %s: %s (%s)", job.provider, job.sandbox_id, error, status)


def _confirmation(job: obligations.Job, provider_outcome: str, seen_domain: str | None) -> obligations.Completion:
    """CLN-6; the observed routing domain is the one the provider's answer named, else the job's own."""
    return obligations.Completion(job, provider_outcome, seen_domain or job.routing_domain)
