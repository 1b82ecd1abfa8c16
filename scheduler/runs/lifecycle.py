"""Run lifecycle (RUN-1..8): launch, claim, park, heartbeat, cancel, status.

Each operation is one named statement in sql/lifecycle.sql; the fences
(lease token, exact attempt, no newer attempt, run lock first) live there.
Answers are dataclasses; the API turns them into JSON (api/responses.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import transaction

from scheduler import db, observability
from scheduler.conf import scheduler_settings
from scheduler.errors import IdempotencyConflict, InvalidInput, NotFound, ReleaseClosed
from scheduler.runs import admission
from scheduler.runs.claiming import Claim, Claims, claim_queued_runs  # noqa: F401 - the lifecycle's claim


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


@dataclass(frozen=True)
class Concurrency:
    """FSH-2: at most `limit` active runs of one org hold `key`."""

    key: str
    limit: int


@dataclass(frozen=True)
class LaunchRequest:
    """A validated launch (api/parsing.py builds it from a request body)."""

    play_name: str
    org_id: str | None = None
    input: Any = None
    launch: dict | None = None
    max_attempts: int = 3
    run_log_store: str | None = None
    graph_hash: str | None = None
    runtime_profile: str | None = None
    definition_scope: str | None = None
    wait_deadline: dt.datetime | None = None
    idempotency_key: str | None = None  # FSH-5: one kept run per org and key
    priority: int = 0  # FSH-3: -100..100, higher first within the org
    concurrency: Concurrency | None = None  # FSH-2
    run_after: dt.datetime | None = None  # FSH-7: never claimed before this instant

    def digest(self) -> str:
        """What makes two launches "the same body" (FSH-5): every field, canonically serialized.

        Fields added after FSH-5 shipped count only when set, so a repeat that spans the deploy of a release that
        added them is still the same body.
        """
        fields = dataclasses.asdict(self)
        for name, default in LATER_FIELDS.items():
            if fields[name] == default:
                del fields[name]
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(body.encode()).hexdigest()


# Launch fields added after idempotency keys (FSH-2, FSH-3, FSH-7), with their defaults.
LATER_FIELDS = {"priority": 0, "concurrency": None, "run_after": None}


@dataclass(frozen=True)
class Launched:
    run_id: str
    deduplicated: bool = False  # FSH-5: a repeat of an earlier launch; run_id is that launch's run
    created_at: dt.datetime | None = None  # when the launch inserted it (None for a repeat)


def launch_run(request: LaunchRequest) -> Launched:
    """RUN-1/ADM-5: insert a queued run and run.created, refused while its release reads closed; FSH-5: a repeat
    of a keyed launch answers the first run, and the same key with another body is a conflict."""
    launch = request.launch or {}
    release_id = launch.get("absurdReleaseId")
    keys = admission.admission_keys(release_id, launch.get("environment")) if release_id else []
    digest = request.digest() if request.idempotency_key is not None else None
    # No savepoint inside a caller's transaction (a schedule's fire, a task's enqueue): the refusals below are
    # raised after the block, so only a database fault, which ends the caller's transaction anyway, can leave it.
    # Without release keys the one statement is the whole launch: no transaction of its own (two round trips
    # fewer).
    with transaction.atomic(savepoint=False) if keys else contextlib.nullcontext():
        admission.lock_keys(keys)
        row = db.fetch_one("runs_launch", {
            "release_keys": keys, "run_id": f"run_{uuid.uuid4().hex}", "org_id": request.org_id,
            "play_name": request.play_name, "graph_hash": request.graph_hash,
            "runtime_profile": request.runtime_profile, "definition_scope": request.definition_scope,
            "launch": json.dumps(launch), "input": _json(request.input), "run_log_store": request.run_log_store,
            "max_attempts": request.max_attempts, "wait_deadline": request.wait_deadline,
            "idempotency_key": request.idempotency_key, "idempotency_digest": digest,
            "priority": request.priority, "run_after": request.run_after,
            "concurrency_key": request.concurrency.key if request.concurrency else None,
            "concurrency_limit": request.concurrency.limit if request.concurrency else None,
        })
    if row["run_id"] is None and request.idempotency_key is not None:
        first = db.fetch_one("runs_read_by_idempotency_key", {"org_id": request.org_id,
                                                              "idempotency_key": request.idempotency_key})
        if first is not None:
            if first["idempotency_digest"] != digest:
                raise IdempotencyConflict(f"idempotencyKey {request.idempotency_key[:80]!r} was used by run "
                                          f"{first['run_id']} with another body", field="idempotencyKey")
            return Launched(first["run_id"], deduplicated=True)
    if row["release_closed"]:
        raise ReleaseClosed(f'release "{release_id}" is closed to new runs')
    if row["run_id"] is None:  # the key's run was removed between the two reads (retention): say so, write nothing
        raise IdempotencyConflict("idempotencyKey's run was just removed; launch again", field="idempotencyKey")
    return Launched(row["run_id"], created_at=row["created_at"])


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
        "resources": [_json(item.resource) for item in parks], "wait_deadlines": [item.wait_deadline for item in parks],
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
    row = db.fetch_one("runs_cancel", {"run_id": run_id, "reason": reason})
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
