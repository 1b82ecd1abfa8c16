"""Run lifecycle (RUN-1..8): launch (launches.py), claim, park, cancel, status; heartbeats: beats.py.

Each operation is one named statement in sql/lifecycle.sql; the fences
(lease token, exact attempt, no newer attempt, run lock first) live there.
Answers are dataclasses; the API turns them into JSON (api/responses.py).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import transaction

from scheduler import db, observability
from scheduler.cleanup.billing import WAITING_RECHECK_SECONDS
from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput, NotFound
from scheduler.runs.claiming import Claim, Claims, claim_queued_runs  # noqa: F401 - the lifecycle's claim
from scheduler.runs.launches import (  # noqa: F401 - the lifecycle's launch
    Concurrency, LaunchRequest, Launched, launch_run)


@dataclass(frozen=True)
class Park:
    """One claimed attempt to park (RUN-3): the sandbox its runner was started in, and the runner's timeout."""
    run_id: str
    attempt: int
    lease_token: str
    sandbox_ref: dict
    heartbeat_timeout_ms: int
    started_at_ms: int
    resource: dict | None = None
    wait_deadline: dt.datetime | None = None

    def suspension(self) -> str:
        return json.dumps({
            "kind": "detached_runner",
            "runnerAttempt": self.attempt,
            "runtimeSandboxRef": self.sandbox_ref,
            "sandboxProvider": self.sandbox_ref.get("provider"),
            "startedAtMs": self.started_at_ms,
            "heartbeatTimeoutMs": self.heartbeat_timeout_ms,
        })


def park_all(parks: list[Park]) -> list[bool]:
    """RUN-3 for many attempts in ONE statement, each fenced on its own; whether each parked, in order.

    A dispatcher's start threads share it through a group parker: the statement's fixed cost (three tables opened
    with their constraints, indexes and triggers, and a commit) is most of a park's cost.
    """
    if not parks:
        return []
    if len({item.run_id for item in parks}) != len(parks):
        raise InvalidInput("a park batch names each run once")
    observability.PARK_BATCH_SIZE.observe(len(parks))
    rows = db.fetch_all("runs_park", {
        "run_ids": [item.run_id for item in parks], "attempts": [item.attempt for item in parks],
        "lease_tokens": [item.lease_token for item in parks], "suspensions": [item.suspension() for item in parks],
        "resources": [db.json_param(item.resource) for item in parks], "wait_deadlines": [item.wait_deadline for item in parks],
    })
    return [bool(row["parked"]) for row in rows]


def park(run_id: str, attempt: int, lease_token: str, sandbox_ref: dict, *, heartbeat_timeout_ms: int,
         started_at_ms: int, resource: dict | None = None, wait_deadline: dt.datetime | None = None) -> bool:
    """RUN-3: the attempt and run wait on the detached runner in its sandbox."""
    return park_one(Park(run_id, attempt, lease_token, sandbox_ref, heartbeat_timeout_ms, started_at_ms, resource,
                         wait_deadline))


def park_one(item: Park) -> bool:
    """RUN-3 for one attempt, on this thread's connection (inside a caller's transaction, with it)."""
    return park_all([item])[0]


@dataclass(frozen=True)
class CancelOutcome:
    run_id: str
    prior_status: str
    cancel_queued: bool
    cancelled_now: bool


def cancel_run(run_id: str, reason: str = "cancel_requested") -> CancelOutcome:
    """RUN-7: queue the cancel; a queued run is cancelled directly."""
    row = db.fetch_one("runs_cancel", {"run_id": run_id, "reason": reason,
                                       "billing_recheck_seconds": WAITING_RECHECK_SECONDS})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    return CancelOutcome(run_id, row["prior_status"], row["cancel_queued"], row["cancelled"])


@dataclass(frozen=True)
class RunSnapshot:
    """RUN-8: what a run's status read returns; no launch secrets, and the schema actually queried."""

    run_id: str
    org_id: str | None
    status: str
    play_name: str
    graph_hash: str | None
    runtime_backend: str | None
    run_log_store: str | None
    definition_scope: str | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    attempts: list
    scheduler_schema: str
    output: Any = None
    error: Any = None
    delivery: dict = field(default_factory=dict)  # the run's facts: how many, delivered, failed heads
    late_results: list = field(default_factory=list)  # results that came after a verdict settled their attempt
    queued_because: str | None = None  # FSH-9: why a queued run still waits (kinds.QueuedBecause)
    wait: dict | None = None  # WAIT-6: what a durably waiting run waits for ({kind, key, event, until, since})


def run_status(run_id: str) -> RunSnapshot:
    row = db.fetch_one("runs_read_status", {"run_id": run_id, "default_max_active": scheduler_settings.org_max_active})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    return RunSnapshot(**row, late_results=late_results(run_id))


def late_results(run_id: str) -> list[dict]:
    """{attempt, received_at, result_json} of each result kept beside a verdict; [] on a schema without them."""
    try:
        with transaction.atomic():
            return db.fetch_all("runs_read_late_results", {"run_id": run_id})
    except psycopg.errors.UndefinedTable:
        return []


@dataclass(frozen=True)
class Standing:
    run_status: str
    attempt_status: str | None
    superseded: bool


def attempt_standing(run_id: str, attempt: int | None) -> Standing | None:
    """RUN-5: where a run and one attempt stand; None when the run is missing.

    With no attempt (a token that names none) the seed's answer: the run's status, no attempt status, not
    superseded.
    """
    row = db.fetch_one("attempts_read_standing", {"run_id": run_id, "attempt": attempt})
    return None if row is None else Standing(row["run_status"], row["attempt_status"], row["superseded"])


def register_array_input_intent(run_id: str, org_id: str, attempt: int) -> bool:
    """RUN-6: serializes with terminal transitions through the run row."""
    if db.execute("runs_register_array_input_intent", {"run_id": run_id, "org_id": org_id, "attempt": attempt}) == 1:
        return True
    if not db.fetch_value("runs_exists", {"run_id": run_id}):
        raise NotFound(f"run {run_id} not found")
    return False


def attempt_lease(run_id: str, attempt: int) -> str:
    row = db.fetch_one("attempts_read_lease", {"run_id": run_id, "attempt": attempt})
    if row is None:
        raise NotFound(f"attempt {attempt} of run {run_id} not found")
    if row["lease_token"] is None:
        raise NotFound(f"attempt {attempt} of run {run_id} has no lease")
    return row["lease_token"]
