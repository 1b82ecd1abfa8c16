"""Runner terminals and settlement (TRM-1..5): one verdict per attempt.

Recording is first-write-wins on the attempt row; settlement is one
statement that moves attempt and run, writes the billing job, the cleanup
obligation and the facts, and is a no-op the second time. Whoever settles
first (the runner's own request or the liveness sweep) wins.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from scheduler import db, validation
from scheduler.errors import InvalidInput, LeaseMismatch, NotFound

RETRYABLE_CODES = ["runner_lost", "dispatch_lost"]
HEARTBEAT_IDENTITY = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
MAX_PROGRESS_EVENTS = 200
_ORDINARY = object()


@dataclass(frozen=True)
class RecordOutcome:
    attempt_exists: bool
    lease_matches: bool
    recorded: bool
    is_this_result: bool


def validate_result(result: Any) -> dict:
    """The runner envelope: status completed (with output) or failed (with error {code, message})."""
    result = validation.json_object(result, "result")
    status = validation.choice(result.get("status"), "result.status", ("completed", "failed"))
    if status == "failed":
        error = validation.json_object(result.get("error"), "result.error")
        validation.text(error.get("code"), "result.error.code", max_length=128)
        if not isinstance(error.get("message", ""), str):
            raise InvalidInput("result.error.message must be a string")
    if "stats" in result and result["stats"] is not None and not isinstance(result["stats"], dict):
        raise InvalidInput("result.stats must be a JSON object")
    return result


def validate_progress_events(events: Any) -> list:
    if events is None:
        return []
    if not isinstance(events, list) or not all(isinstance(event, dict) for event in events):
        raise InvalidInput("terminalProgressEvents must be a list of JSON objects")
    if len(events) > MAX_PROGRESS_EVENTS:
        raise InvalidInput(f"terminalProgressEvents holds at most {MAX_PROGRESS_EVENTS} events")
    return events


def _check_identity(identity: Any, synthetic: bool) -> None:
    """TRM-3: the exact microsecond identity, or None for "no heartbeat ever"."""
    if synthetic and identity is not None:
        if not isinstance(identity, str) or not HEARTBEAT_IDENTITY.fullmatch(identity):
            raise InvalidInput("expectedHeartbeatIdentity must be YYYY-MM-DDTHH:MM:SS.ffffffZ or null")


def record_runner_terminal(
    run_id: str,
    attempt: int,
    result: dict,
    *,
    lease_token: str | None = None,
    progress_events: list | None = None,
    log_payload: Any = None,
    expected_heartbeat_identity: Any = _ORDINARY,
) -> RecordOutcome:
    """TRM-1/TRM-2: record first-write-wins; a synthetic loss passes the heartbeat identity it saw.

    `expected_heartbeat_identity` is a TRM-3 identity string, or None for "no
    heartbeat ever"; leaving it out is ordinary runner ingress.
    """
    synthetic = expected_heartbeat_identity is not _ORDINARY
    _check_identity(expected_heartbeat_identity, synthetic)
    envelope = dict(result)
    if progress_events:
        envelope["terminalProgressEvents"] = progress_events
    row = db.fetch_one(
        "attempts_record_terminal",
        {
            "run_id": run_id,
            "attempt": attempt,
            "lease_token": lease_token,
            "result": json.dumps(envelope),
            "log_payload": None if log_payload is None else json.dumps(log_payload),
            "synthetic": synthetic,
            "expected_heartbeat_at": expected_heartbeat_identity if synthetic else None,
        },
    )
    return RecordOutcome(row["attempt_exists"], row["lease_matches"], row["recorded"], row["is_this_result"])


@dataclass(frozen=True)
class Settlement:
    """One attempt to settle: its fences and, for ingress, the runner terminal to record first."""

    run_id: str
    attempt: int
    lease_token: str | None
    result: dict | None = None
    progress_events: list | None = None
    log_payload: Any = None
    expected_heartbeat_identity: Any = _ORDINARY
    from_runner: bool = False  # the runner's own terminal request (not the sweep's or the dispatcher's)

    def envelope(self) -> str | None:
        if self.result is None:
            return None
        envelope = dict(self.result)
        if self.progress_events:
            envelope["terminalProgressEvents"] = self.progress_events
        return json.dumps(envelope)


def settle_attempts(settlements: list[Settlement]) -> list[dict]:
    """TRM-4 (with TRM-1/TRM-2 where a result is given) for many attempts in ONE statement.

    Each item is fenced on its own (lease, current attempt, heartbeat
    identity); one answer per item, in order, as `settle_attempt` returns.
    Batching is how a settler keeps up: the statement's fixed cost is paid
    once per batch (River's batch completer does the same for job states).
    """
    if not settlements:
        return []
    if len({item.run_id for item in settlements}) != len(settlements):
        raise InvalidInput("a settlement batch names each run once")
    for item in settlements:
        _check_identity(item.expected_heartbeat_identity, item.expected_heartbeat_identity is not _ORDINARY)
    return db.fetch_all(
        "attempts_settle",
        {
            "run_ids": [item.run_id for item in settlements],
            "attempts": [item.attempt for item in settlements],
            "lease_tokens": [item.lease_token for item in settlements],
            "results": [item.envelope() for item in settlements],
            "log_payloads": [None if item.log_payload is None else json.dumps(item.log_payload) for item in settlements],
            "synthetic": [item.expected_heartbeat_identity is not _ORDINARY for item in settlements],
            "expected_heartbeat_ats": [
                None if item.expected_heartbeat_identity is _ORDINARY else item.expected_heartbeat_identity
                for item in settlements
            ],
            "from_runner": [item.from_runner for item in settlements],
            "retryable_codes": RETRYABLE_CODES,
        },
    )


def settle_attempt(
    run_id: str,
    attempt: int,
    lease_token: str | None,
    result: dict | None = None,
    *,
    progress_events: list | None = None,
    log_payload: Any = None,
    expected_heartbeat_identity: Any = _ORDINARY,
) -> dict:
    """TRM-4 (with TRM-1/TRM-2 when `result` is given): one statement records and settles.

    Returns attempt_exists, lease_matches, recorded, is_this_result, and
    run_status/outcome (None when nothing was settled: already settled, not
    current, or no terminal recorded).
    """
    return settle_attempts([Settlement(run_id, attempt, lease_token, result, progress_events, log_payload,
                                       expected_heartbeat_identity)])[0]


def ingest_runner_terminal(
    run_id: str, attempt: int, lease_token: str, result: dict, progress_events: list | None = None, log_payload: Any = None,
    *, settle: Callable[[Settlement], dict] | None = None,
) -> dict:
    """The runner's terminal request: record and settle in one statement. 404 unknown attempt, 409 lease mismatch.

    `settle` runs the settlement (default: its own statement on this thread's
    connection; the web process passes the group settler).
    """
    item = Settlement(run_id, attempt, lease_token, result, progress_events, log_payload, from_runner=True)
    outcome = settle(item) if settle else settle_attempts([item])[0]
    if not outcome["attempt_exists"]:
        raise NotFound(f"attempt {attempt} of run {run_id} not found")
    if not outcome["lease_matches"]:
        raise LeaseMismatch(f"lease does not match attempt {attempt} of run {run_id}")
    return {"recorded": outcome["recorded"], "settled": outcome["run_status"] is not None, "runStatus": outcome["run_status"]}


def recorded_terminals(release_id: str | None = None, limit: int = 100) -> list[dict]:
    """TRM-7: recorded runner terminals on still-open attempts, per release lane, with the run's current suspension."""
    return db.fetch_all("attempts_list_unsettled_terminals", {"release_id": release_id, "limit": limit})
