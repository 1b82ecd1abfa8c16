"""The liveness sweep (SWP-1..7, RUN-9, RUN-10): one fenced verdict for a vanished runner.

1. Discover, read-only, per provider: recorded terminals to settle, stale
   parked runners to inspect (SWP-1, SWP-2).
2. Settle recorded terminals (SWP-5).
3. Ask each stale runner's provider whether its sandbox runs (SWP-3). A live
   one is left alone; a gone one gets the fenced runner_lost verdict (SWP-4),
   then settlement. A false verdict means something moved and that wins.
4. Recoveries no runner can report: expired claims (RUN-9, dispatch_lost;
   the verdict, like the settlement of a runner that reported without its
   attempt ever parking, leaves a key by which the sweep finds that sandbox
   and gives it its cleanup obligation), unacknowledged cancels (RUN-10, after asking the provider to stop the
   sandbox), passed hard ceilings (SWP-7, without asking the provider).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from dataclasses import dataclass, field

import psycopg
from django.db import connection, transaction

from scheduler import db
from scheduler.kinds import SUSPENSION_FALLBACK_PROVIDER, FailureCode, Provider, ResultStatus, VerdictKind, values
from scheduler.providers import Inspection, ProviderError, SandboxRef, get_provider, sandbox_placement
from scheduler.runs import settlement

logger = logging.getLogger("scheduler.sweep.liveness")


@dataclass
class LivenessTick:
    counts: dict = field(default_factory=lambda: {
        "inspected": 0, "alive": 0, "unknown": 0, "verdicts": 0, "fenced": 0, "settled": 0,
        "dispatch_lost": 0, "cancels_settled": 0, "deadlines_settled": 0, "unparked_reconciled": 0,
    })
    cursors: dict = field(default_factory=dict)
    inspected_by_provider: dict = field(default_factory=dict)


def _failed(code: FailureCode, message: str) -> dict:
    """A failed result the scheduler records in the runner's stead; `verdict` marks it as the scheduler's, so a
    runner result that arrives later is kept beside it (attempts_keep_late_result), never instead of it."""
    return {"status": ResultStatus.FAILED, "error": {"code": code, "message": message}, "verdict": code}


@dataclass(frozen=True)
class LossRecord:
    """TRM-2: whether this call recorded the loss, and whether a result is recorded at all (by it or earlier)."""

    recorded_now: bool
    recorded: bool


def record_runner_loss(run_id: str, attempt: int, lease_token: str, expected_heartbeat_identity: str | None,
                       result: dict, log_payload: dict | None = None) -> LossRecord:
    """TRM-2: the synthetic runner-loss ingress, fenced on the heartbeat identity the caller saw (None: no
    heartbeat ever), the lease, no newer attempt and no queued cancel; it never overwrites a recorded result."""
    row = db.fetch_one("attempts_record_runner_loss", {
        "run_id": run_id, "attempt": attempt, "lease_token": lease_token,
        "expected_heartbeat_at": expected_heartbeat_identity, "result": json.dumps(result),
        "log_payload": None if log_payload is None else json.dumps(log_payload),
    })
    return LossRecord(bool(row["recorded_now"]), bool(row["recorded"]))


def record_verdict(kind: VerdictKind, row: dict, result: dict, now: dt.datetime | None, identity=None) -> bool:
    """SWP-4: the fenced first write; then settle what is recorded. False when a fence moved (nothing recorded by
    this call).

    `kind` must be a VerdictKind: a misspelt kind raises here, and the
    statement itself refuses a kind it does not know.
    """
    kind = VerdictKind(kind)
    log_payload = {"attempt": row["attempt"], "verdict": kind}
    if kind is VerdictKind.RUNNER_LOST:
        loss = record_runner_loss(row["run_id"], row["attempt"], row["lease_token"], identity, result, log_payload)
        recorded_now, recorded = loss.recorded_now, loss.recorded
    else:
        recorded_now = recorded = bool(db.execute("attempts_record_parked_verdict", {
            "run_id": row["run_id"], "attempt": row["attempt"], "lease_token": row["lease_token"], "kind": kind,
            "expected_heartbeat_at": identity, "now": now, "result": json.dumps(result),
            "log_payload": json.dumps(log_payload),
        }))
    if recorded:
        # A result an earlier call recorded (the runner's own, say) is settled too: the attempt must not wait for
        # the next sweep's SWP-5 pass.
        settlement.settle_attempt(row["run_id"], row["attempt"], row["lease_token"])
    return recorded_now


def discover(limit: int, default_timeout_ms: int, after_run_ids: dict | None = None, now=None) -> list[dict]:
    """SWP-1, SWP-2: what needs action, found through attempts.liveness_deadline's index.

    Reader-first (SCH-3) without a catalog read every tick: on a schema without the column the statement
    fails with 42703 naming it and the historical statement runs instead (nothing is cached: a deploy may add
    the column at any time).
    """
    params = {
        "limit": max(1, min(100, int(limit))), "default_timeout_ms": default_timeout_ms,
        "after_run_ids": json.dumps(after_run_ids or {}), "now": now,
        "providers": list(values(Provider)), "fallback_provider": SUSPENSION_FALLBACK_PROVIDER,
    }
    # Inside a caller's transaction a savepoint keeps the fallback possible; alone, the failure aborts nothing.
    guard = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with guard:
            return db.fetch_all("runs_list_liveness_work", params)
    except psycopg.errors.UndefinedColumn as error:
        if "liveness_deadline" not in str(error):
            raise
    return db.fetch_all("runs_list_liveness_work_historical", params)


def next_cursors(result: LivenessTick, limit: int) -> dict:
    """SWP-2: walk on past a provider's read candidates only while its page was full."""
    return {provider: result.cursors[provider]
            for provider, seen in result.inspected_by_provider.items() if seen >= limit}


def said(action: str, run_id: str, attempt, **details) -> None:
    """SWP-6: one structured line per action the sweep takes (`liveness action=... run=... attempt=...`)."""
    extra = "".join(f" {key}={value}" for key, value in details.items())
    logger.info("liveness action=%s run=%s attempt=%s%s", action, run_id, attempt, extra)


def run_once(limit: int = 100, default_timeout_ms: int = 60_000, after_run_ids: dict | None = None,
             now: dt.datetime | None = None) -> LivenessTick:
    result = LivenessTick(cursors=dict(after_run_ids or {}))
    work = discover(limit, default_timeout_ms, after_run_ids, now)
    # Recorded terminals nobody settled yet (SWP-5): all of them in one statement.
    recorded = [settlement.Settlement(row["run_id"], row["attempt"], row["lease_token"])
                for row in work if row["work"] == "settle"]
    answers = settlement.settle_attempts(recorded)
    for answer in answers:
        if answer.run_status:
            result.counts["settled"] += 1
            said("settled_recorded_terminal", answer.run_id, answer.attempt, status=answer.run_status)
    for row in work:
        if row["work"] == "settle":
            continue
        result.cursors[row["provider"]] = row["run_id"]
        result.inspected_by_provider[row["provider"]] = result.inspected_by_provider.get(row["provider"], 0) + 1
        inspect_and_judge(row, result, now)
    recover(limit, default_timeout_ms, result, now)
    return result


def inspect_and_judge(row: dict, result: LivenessTick, now=None) -> None:
    result.counts["inspected"] += 1
    ref = SandboxRef.from_suspension(row["suspension_json"])
    try:
        seen = get_provider(ref.provider).inspect(ref)
    except ProviderError as error:
        logger.warning("liveness run=%s provider=%s inspect failed: %s", row["run_id"], ref.provider, error)
        seen = Inspection.UNKNOWN
    if seen is not Inspection.GONE:
        result.counts["alive" if seen is Inspection.RUNNING else "unknown"] += 1
        return
    lost = _failed(FailureCode.RUNNER_LOST, f"{ref.provider} sandbox {ref.sandbox_id} is gone")
    if record_verdict(VerdictKind.RUNNER_LOST, row, lost, now, row["heartbeat_identity"]):
        result.counts["verdicts"] += 1
        said("runner_lost", row["run_id"], row["attempt"], provider=ref.provider)
    else:
        result.counts["fenced"] += 1
        said("verdict_fenced", row["run_id"], row["attempt"], provider=ref.provider)


def _sandboxes_left_by_start(row: dict, provider_name: str, routing_domain: str | None) -> list[SandboxRef] | None:
    """What a start left for an attempt that never parked; None: ask again next tick.

    A permanent error (no credential, wrong base URL) will not heal by
    waiting, so the claim is recovered without them; the error is logged.
    """
    try:
        return get_provider(provider_name).find_started(row["run_id"], row["attempt"], routing_domain)
    except ProviderError as error:
        logger.warning("liveness run=%s attempt=%s provider=%s could not list the claim's sandboxes: %s",
                       row["run_id"], row["attempt"], provider_name, error)
        return [] if error.permanent else None


def reconcile_unparked_sandboxes(limit: int, result: LivenessTick) -> None:
    """Runners that reported from a sandbox their attempt never parked: find it by its tags, oblige its cleanup."""
    for row in db.fetch_all("control_list_unreconciled_sandboxes", {"limit": limit}):
        provider_name, routing_domain = sandbox_placement(row["launch_json"] or {}, row["org_id"])
        started = _sandboxes_left_by_start(row, provider_name, routing_domain)
        if started is None:
            result.counts["unknown"] += 1
            continue
        db.fetch_one("control_reconcile_unparked_sandboxes", {
            "key": row["key"], "provider": provider_name, "routing_domain": routing_domain,
            "sandbox_ids": [ref.sandbox_id for ref in started],
        })
        result.counts["unparked_reconciled"] += 1
        said("unparked_reconciled", row["run_id"], row["attempt"], sandboxes=len(started))


def recover(limit: int, default_timeout_ms: int, result: LivenessTick, now=None) -> None:
    for row in db.fetch_all("attempts_list_expired_claims", {"limit": limit, "now": now}):
        recorded = db.execute("attempts_record_dispatch_lost", {
            "run_id": row["run_id"], "attempt": row["attempt"], "lease_token": row["lease_token"], "now": now,
            "expected_heartbeat_at": row["heartbeat_identity"],
            "result": json.dumps(_failed(FailureCode.DISPATCH_LOST, "the claim expired before its runner was parked")),
        })
        if recorded:
            settlement.settle_attempt(row["run_id"], row["attempt"], row["lease_token"])
            result.counts["dispatch_lost"] += 1
            said("dispatch_lost", row["run_id"], row["attempt"])
    # After the verdicts above, so a claim recovered in this tick has its sandbox found in it too.
    reconcile_unparked_sandboxes(limit, result)
    cancels = db.fetch_all("runs_list_unacknowledged_cancels",
                           {"limit": limit, "default_timeout_ms": default_timeout_ms, "now": now})
    for row in cancels:
        ref = SandboxRef.from_suspension(row["suspension_json"])
        try:
            get_provider(ref.provider).delete(ref)
        except ProviderError as error:
            logger.warning("liveness run=%s cancel: provider stop failed: %s", row["run_id"], error)
        cancelled = _failed(FailureCode.CANCELLED, "the runner did not acknowledge the cancel in time")
        if record_verdict(VerdictKind.CANCEL_UNACKNOWLEDGED, row, cancelled, now, row["heartbeat_identity"]):
            result.counts["cancels_settled"] += 1
            said("cancel_unacknowledged", row["run_id"], row["attempt"])
    for row in db.fetch_all("runs_list_passed_wait_deadlines", {"limit": limit, "now": now}):
        exceeded = _failed(FailureCode.WAIT_DEADLINE_EXCEEDED, "the run's hard ceiling passed")
        if record_verdict(VerdictKind.WAIT_DEADLINE_EXCEEDED, row, exceeded, now):
            result.counts["deadlines_settled"] += 1
            said("wait_deadline_exceeded", row["run_id"], row["attempt"])
