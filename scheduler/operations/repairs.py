"""Repairs an operator runs from the admin or a command (never a second code path).

Each runs the same fenced statement a worker or the API runs, and records an
`operator_actions` row (who, what, on what, why, what came of it) in the same
transaction. A repair its fence refuses changes nothing and says why; it
never forces.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import transaction

from scheduler import db
from scheduler.cleanup import obligations
from scheduler.errors import NotFound, OpeningRefused, SchedulerError
from scheduler.kinds import FailureCode, FireOutcome, ResultStatus, VerdictKind
from scheduler.outbox import settle
from scheduler.periodic import definitions, firing, slots
from scheduler.runs import admission, lifecycle, liveness


@dataclass(frozen=True)
class Repair:
    action: str
    target: str
    changed: bool
    outcome: str

    def line(self) -> str:
        return f"{self.action} {self.target}: {self.outcome}"


def _audited(actor: str, action: str, target: str, reason: str | None, run) -> Repair:
    with transaction.atomic():
        changed, outcome = run()
        db.fetch_one("operator_actions_record", {"actor": actor, "action": action, "target": target, "reason": reason,
                                                 "outcome": outcome, "changed": changed})
    return Repair(action, target, changed, outcome)


def cancel_run(run_id: str, actor: str, reason: str | None = None) -> Repair:
    """RUN-7 on an operator's word: a queued run is cancelled now, an active one gets its cancel queued."""
    def run():
        try:
            answer = lifecycle.cancel_run(run_id, reason or "cancelled by an operator")
        except NotFound:
            return False, "nothing changed: no such run"
        if answer.cancelled_now:
            return True, "cancelled"
        if answer.cancel_queued:
            return True, "cancel queued; the runner stops at its next heartbeat (the sweep settles it otherwise)"
        return False, f"nothing changed: the run is already {answer.prior_status}"

    return _audited(actor, "cancel_run", run_id, reason, run)


def end_wait(run_id: str, actor: str, reason: str | None = None) -> Repair:
    """WAIT-7 on an operator's word: a run waiting durably resumes now, its wait timed out."""
    from scheduler.waits import wakeups

    def run():
        try:
            prior, resumed = wakeups.end_now(run_id)
        except NotFound:
            return False, "nothing changed: no such run"
        if resumed:
            return True, "resumed: its wait answers the timeout marker"
        return False, f"nothing changed: the run is {prior}, not waiting durably"

    return _audited(actor, "end_wait", run_id, reason, run)


def requeue_outbox_head(event_id: str, actor: str, reason: str | None = None) -> Repair:
    """OBX-2: a failed head becomes deliverable again, unblocking its run's lane."""
    def run():
        if settle.requeue_failed_head(event_id):
            return True, "requeued: its run's lane delivers again"
        return False, "nothing changed: not a failed outbox head"

    return _audited(actor, "requeue_outbox_head", event_id, reason, run)


def unblock_cleanup(provider: str, sandbox_id: str, routing_domain: str | None, actor: str,
                    reason: str | None = None) -> Repair:
    """CLN-7: a blocked cleanup job becomes pending and due now, its failure count reset."""
    def run():
        if obligations.unblock(provider, sandbox_id, routing_domain):
            return True, "unblocked: the next cleanup pass deletes it"
        return False, "nothing changed: no blocked cleanup job with that identity"

    target = f"{provider}:{sandbox_id}:{routing_domain or ''}"
    return _audited(actor, "unblock_cleanup", target, reason, run)


def set_release_admission(release_id: str, accepting: bool, epoch: int, environment: str | None, actor: str,
                          reason: str | None = None) -> Repair:
    """ADM-4: close (monotonic, a stale close is a no-op) or open (every key at exactly that epoch, or refused)."""
    def run():
        try:
            state = admission.set_admission(release_id, accepting, epoch, environment)
        except OpeningRefused as error:
            return False, f"nothing changed: {error.message}"
        if state is None or state.accepting != accepting:
            return False, f"nothing changed: a newer epoch ({state.admission_epoch if state else '?'}) is recorded"
        return True, f"{'accepting' if accepting else 'closed'} at epoch {state.admission_epoch}"

    target = f"{environment}:{release_id}" if environment else release_id
    return _audited(actor, "open_release" if accepting else "close_release", target, reason, run)


def declare_runner_lost(run_id: str, actor: str, reason: str | None = None) -> Repair:
    """SWP-4 on an operator's word: the sweep's own fenced verdict (heartbeat identity, lease, no newer attempt,
    no queued cancel), then settlement. A runner that heartbeats meanwhile wins: nothing changes."""
    def run():
        try:
            row = db.fetch_one("runs_read_parked_attempt", {"run_id": run_id})
        except SchedulerError as error:
            return False, f"nothing changed: {error.message}"
        if row is None:
            return False, "nothing changed: the run is not waiting on a detached runner"
        lost = {"status": ResultStatus.FAILED, "verdict": FailureCode.RUNNER_LOST,
                "error": {"code": FailureCode.RUNNER_LOST, "message": f"declared lost by {actor}"}}
        if liveness.record_verdict(VerdictKind.RUNNER_LOST, row, lost, None, row["heartbeat_identity"]):
            return True, "runner declared lost: the attempt is settled (retried while attempts remain)"
        return False, "nothing changed: a fence moved (a heartbeat, a result, a cancel or a newer attempt)"

    return _audited(actor, "declare_runner_lost", run_id, reason, run)


def redrive_cleanup(provider: str, sandbox_id: str, routing_domain: str | None, actor: str,
                    reason: str | None = None) -> Repair:
    """CLN-4: a pending job that waits (backoff or read-back) becomes due now; a leased one is left to its worker."""
    def run():
        if db.fetch_all("sandbox_cleanup_redrive", {"provider": provider, "sandbox_id": sandbox_id,
                                                    "routing_domain": routing_domain}):
            return True, "due now: the next cleanup pass takes it"
        return False, "nothing changed: no waiting, unleased pending cleanup job with that identity"

    target = f"{provider}:{sandbox_id}:{routing_domain or ''}"
    return _audited(actor, "redrive_cleanup", target, reason, run)


def repair_schedule_fire(schedule_id: str, slot_at, actor: str, reason: str | None = None) -> Repair:
    """SCD-6: a missed, skipped or refused slot of a schedule fires once, now; a slot that launched is left alone."""
    def run():
        try:
            schedule = definitions.read(schedule_id)
        except NotFound:
            return False, "nothing changed: no such schedule"
        if slots.following(schedule["cron"], schedule["timezone"], slot_at - dt.timedelta(microseconds=1)) != slot_at:
            return False, "nothing changed: that time is not a slot of the schedule"
        if slot_at > dt.datetime.now(dt.UTC):
            return False, "nothing changed: the slot is not due yet"
        fire = db.fetch_one("schedule_fires_lock_slot", {"schedule_id": schedule_id, "slot_at": slot_at})
        if fire is not None and fire["outcome"] == FireOutcome.LAUNCHED:
            return False, f"nothing changed: the slot already launched run {fire['run_id']}"
        fired = firing.launch(schedule, slot_at)
        if fired.outcome is not FireOutcome.LAUNCHED:
            return False, f"nothing changed: the launch was {fired.outcome} ({fired.error})"
        if db.fetch_one("schedule_fires_repair", {"schedule_id": schedule_id, "slot_at": slot_at,
                                                  "run_id": fired.run_id}) is None:
            # The loop reached the slot meanwhile and launched it; the launch above found that run by the slot's key.
            return False, f"nothing changed: the schedule's loop launched the slot meanwhile (run {fired.run_id})"
        return True, f"launched run {fired.run_id}"

    target = f"{schedule_id}@{slot_at.astimezone(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    return _audited(actor, "repair_schedule_fire", target, reason, run)
