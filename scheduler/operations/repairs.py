"""Repairs an operator runs from the admin or a command (never a second code path).

Each runs the same fenced statement a worker or the API runs, and records an
`operator_actions` row (who, what, on what, why, what came of it) in the same
transaction. A repair its fence refuses changes nothing and says why; it
never forces.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from scheduler import db
from scheduler.cleanup import obligations
from scheduler.errors import NotFound
from scheduler.outbox import claims
from scheduler.runs import lifecycle


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


def requeue_outbox_head(event_id: str, actor: str, reason: str | None = None) -> Repair:
    """OBX-2: a failed head becomes deliverable again, unblocking its run's lane."""
    def run():
        if claims.requeue_failed_head(event_id):
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
