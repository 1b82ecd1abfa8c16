"""Domain answers into the API's camelCase JSON; the only place that knows the wire names."""

from __future__ import annotations

import datetime as dt

from scheduler.runs.admission import Admission
from scheduler.runs.receipts import ReceiptAnswer
from scheduler.runs.beats import Heartbeat
from scheduler.runs.lifecycle import CancelOutcome, RunSnapshot, Standing
from scheduler.runs.settlement import TerminalAnswer


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def run_snapshot(snapshot: RunSnapshot, *, include_definition_scope: bool = False) -> dict:
    """RUN-8: runLogStore only for planet_scale runs, definitionScope only when asked for."""
    answer = {
        "runId": snapshot.run_id,
        "orgId": snapshot.org_id,
        "status": snapshot.status,
        "playName": snapshot.play_name,
        "graphHash": snapshot.graph_hash,
        "runtimeBackend": snapshot.runtime_backend,
        "createdAt": _iso(snapshot.created_at),
        "updatedAt": _iso(snapshot.updated_at),
        "startedAt": _iso(snapshot.started_at),
        "finishedAt": _iso(snapshot.finished_at),
        "attempts": snapshot.attempts,
        "schedulerSchema": snapshot.scheduler_schema,
        "delivery": snapshot.delivery,
    }
    if snapshot.queued_because is not None:
        answer["queuedBecause"] = snapshot.queued_because
    if snapshot.wait is not None:
        answer["wait"] = snapshot.wait
    if snapshot.output is not None:
        answer["output"] = snapshot.output
    if snapshot.error is not None:
        answer["error"] = snapshot.error
    if snapshot.run_log_store == "planet_scale":
        answer["runLogStore"] = "planet_scale"
    if include_definition_scope:
        answer["definitionScope"] = snapshot.definition_scope
    if snapshot.late_results:
        answer["lateResults"] = [
            {"attempt": late["attempt"], "note": "finished after being declared lost",
             "receivedAt": _iso(late["received_at"]), "result": late["result_json"]}
            for late in snapshot.late_results
        ]
    return answer


def heartbeat(beat: Heartbeat) -> dict:
    return {"current": beat.current, "cancelRequested": beat.cancel_requested, "heartbeatIdentity": beat.heartbeat_identity}


def cancel(outcome: CancelOutcome) -> dict:
    return {"runId": outcome.run_id, "priorStatus": outcome.prior_status, "cancelQueued": outcome.cancel_queued,
            "cancelledNow": outcome.cancelled_now}


def standing(answer: Standing) -> dict:
    return {"runStatus": answer.run_status, "attemptStatus": answer.attempt_status, "superseded": answer.superseded}


def terminal(answer: TerminalAnswer) -> dict:
    body = {"recorded": answer.recorded, "settled": answer.settled, "runStatus": answer.run_status}
    if answer.late:
        body["late"] = True
    return body


def admission(release_id: str, state: Admission) -> dict:
    return {"releaseId": release_id, "accepting": state.accepting, "admissionEpoch": state.admission_epoch}


def run_row(row: dict) -> dict:
    """One run of a list: enough to pick it out and see how it ended."""
    return {"runId": row["run_id"], "orgId": row["org_id"], "status": row["status"], "playName": row["play_name"],
            "releaseId": row["release_id"], "createdAt": _iso(row["created_at"]), "finishedAt": _iso(row["finished_at"]),
            "attempts": row["attempts"] or 0, "maxAttempts": row["max_attempts"], "errorCode": row["error_code"],
            **({"queuedBecause": row["queued_because"]} if row["queued_because"] else {})}


def receipt(answer: ReceiptAnswer) -> dict:
    """RCP-1: one key's answer; `leaseId` only when this call gave the caller the lease."""
    return {
        "key": answer.key,
        "outcome": answer.outcome.value,
        "status": answer.status,
        "written": answer.changed,
        "leaseId": answer.lease_id,
        "leaseExpiresAt": _iso(answer.lease_expires_at),
        "runAttempt": answer.run_attempt,
        "output": answer.output,
        "error": answer.error,
    }


def receipts(answers: list[ReceiptAnswer], batch: bool) -> dict:
    if batch:
        return {"current": True, "receipts": [receipt(answer) for answer in answers]}
    return {"current": True, "receipt": receipt(answers[0])}


def liveness(answer) -> dict:
    return {"heartbeatAt": _iso(answer.heartbeat_at), "heartbeatIdentity": answer.heartbeat_identity,
            "updatedAt": _iso(answer.updated_at), "status": answer.status}


def recorded_terminal(row: dict) -> dict:
    """A recorded runner terminal awaiting settlement: identity and outcome; never its lease token."""
    result = row["result"] if isinstance(row["result"], dict) else {}
    return {"releaseId": row["release_id"], "runId": row["run_id"], "attempt": row["attempt"],
            "resultStatus": result.get("status"), "errorCode": (result.get("error") or {}).get("code")
            if isinstance(result.get("error"), dict) else None}


def org_limits(state) -> dict:
    """FSH-10: an org's limits (null: the default) with its active and queued runs."""
    return {"orgId": state.org_id, "maxActive": state.max_active, "maxStartsPerMinute": state.max_starts_per_minute,
            "paused": state.paused, "weight": state.weight, "reason": state.reason, "active": state.active,
            "queued": state.queued}


def wait_answer(answer) -> dict:
    """WAIT-1: what the play's wait step is told: `completed` with the stored output, or `suspend`."""
    reply = {"outcome": answer.outcome, "kind": answer.kind, "event": answer.event_name, "until": _iso(answer.deadline)}
    if answer.outcome == "completed":
        reply["output"] = answer.output
    return reply
