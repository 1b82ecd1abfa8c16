"""The play's side of a durable wait (WAIT-1, WAIT-2): beginning a wait, and the suspended result that ends an attempt.

Each is one statement of sql/waits.sql, fenced there like a receipt call or a terminal: a call from an attempt that
is no longer current changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from scheduler import db
from scheduler.cleanup.billing import WAITING_RECHECK_SECONDS
from scheduler.errors import Conflict
from scheduler.kinds import SUSPENSION_FALLBACK_PROVIDER, WaitKind, WaitOutcome
from scheduler.runs.receipts import AttemptNotCurrent, Caller
from scheduler.runs.settlement import Settled, Settlement, TerminalAnswer, ingest_runner_terminal


class WaitKeyConflict(Conflict):
    code = "wait_key_conflict"


class NoOpenWait(Conflict):
    code = "no_open_wait"


@dataclass(frozen=True)
class Wait:
    """What the play asked to wait for: an event by name (with an optional timeout) or a time."""

    key: str
    kind: WaitKind
    event_name: str | None = None
    delay_ms: float | None = None  # from now, at its first recording
    until: dt.datetime | None = None  # an instant instead of a delay


@dataclass(frozen=True)
class WaitAnswer:
    outcome: WaitOutcome
    output: Any  # the stored result when completed: {"event": {...}} or {"timedOut": true}
    kind: str
    event_name: str | None
    deadline: dt.datetime | None


def begin(caller: Caller, wait: Wait) -> WaitAnswer:
    """WAIT-1: the wait's stored result, or `suspend` once it is recorded; 409 when the attempt is not current or
    the key is a step's or another wait's."""
    row = db.fetch_one("waits_begin", {
        "run_id": caller.run_id, "attempt": caller.attempt, "lease_token": caller.lease_token, "key": wait.key,
        "kind": wait.kind, "event_name": wait.event_name, "delay_ms": wait.delay_ms, "until": wait.until,
    })
    if not row["current"]:
        raise AttemptNotCurrent(f"attempt {caller.attempt} of run {caller.run_id} is not current")
    if row["outcome"] == "conflict":
        raise WaitKeyConflict(f"key {wait.key[:80]!r} is already a step's, or a wait for something else",
                              field="key")
    return WaitAnswer(WaitOutcome(row["outcome"]), row["output"], row["kind"], row["event_name"], row["deadline"])


def suspend(item: Settlement, key: str) -> TerminalAnswer:
    """WAIT-2: the runner's suspended result, recorded and settled in one statement, answered as any terminal is
    (404 unknown attempt, 409 lease mismatch, kept beside a verdict that settled the attempt first); 409 when the
    attempt is current but has no open wait of that key."""
    def settle(item: Settlement) -> Settled:
        row = db.fetch_one("attempts_suspend", {
            "run_id": item.run_id, "attempt": item.attempt, "lease_token": item.lease_token, "key": key,
            "result": json.dumps(item.result), "fallback_provider": SUSPENSION_FALLBACK_PROVIDER,
            "billing_recheck_seconds": WAITING_RECHECK_SECONDS,
        })
        if row.pop("current") and row["outcome"] is None:
            raise NoOpenWait(f"run {item.run_id} has no open wait {key[:80]!r} to suspend on", field="result.wait.key")
        return Settled(item.run_id, item.attempt, **row)

    return ingest_runner_terminal(item, settle=settle)
