"""Run lifecycle (RUN-1..8): launch, claim, park, heartbeat, cancel, status.

Each operation is one named statement in sql/lifecycle.sql; the fences
(lease token, exact attempt, no newer attempt, run lock first) live there.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from scheduler import admission, db, validation
from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput, NotFound, ReleaseClosed

URL_KEYS = ("runtimeApiBaseUrl", "baseUrl", "arrayInputTerminalProjectionOrigin")
TOKEN_KEYS = ("executorToken", "coordinatorInternalToken", "vercelProtectionBypassToken")


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


@dataclass(frozen=True)
class LaunchRequest:
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


def validate_launch_json(launch: Any) -> dict:
    """SPEC 1.8: the keys the scheduler reads must have their types."""
    launch = validation.json_object(launch, "launch")
    if "absurdReleaseId" in launch:
        validation.text(launch["absurdReleaseId"], "launch.absurdReleaseId")
    if "environment" in launch:
        validation.choice(launch["environment"], "launch.environment", admission.ENVIRONMENTS)
    for key in URL_KEYS + TOKEN_KEYS:
        if key in launch and launch[key] is not None and not isinstance(launch[key], str):
            raise InvalidInput(f"launch.{key} must be a string")
    if "arrayInputTerminalRetirementSupported" in launch:
        validation.boolean(launch["arrayInputTerminalRetirementSupported"], "launch.arrayInputTerminalRetirementSupported")
    if "maxConcurrentExternalCalls" in launch:
        validation.integer(launch["maxConcurrentExternalCalls"], "launch.maxConcurrentExternalCalls", minimum=1)
    snapshot = launch.get("contractSnapshot")
    if snapshot is not None:
        snapshot = validation.json_object(snapshot, "launch.contractSnapshot")
        compatibility = validation.json_object(snapshot.get("compatibility", {}), "launch.contractSnapshot.compatibility")
        for key in ("terminalRuntimePerformanceSupported", "terminalRuntimeBodyAdmissionSupported"):
            if key in compatibility:
                validation.boolean(compatibility[key], f"launch.contractSnapshot.compatibility.{key}")
        sandbox = validation.json_object(snapshot.get("sandbox", {}), "launch.contractSnapshot.sandbox")
        if "timeoutSeconds" in sandbox:
            validation.integer(sandbox["timeoutSeconds"], "launch.contractSnapshot.sandbox.timeoutSeconds", minimum=1)
    return launch


def parse_launch_request(body: Any) -> LaunchRequest:
    body = validation.json_object(body, "body")
    wait_deadline = body.get("waitDeadline")
    if wait_deadline is not None:
        try:
            wait_deadline = dt.datetime.fromisoformat(validation.text(wait_deadline, "waitDeadline"))
        except ValueError:
            raise InvalidInput("waitDeadline must be an ISO 8601 timestamp") from None
        if wait_deadline.tzinfo is None:
            raise InvalidInput("waitDeadline must carry a time zone")
    return LaunchRequest(
        play_name=validation.text(validation.field(body, "playName"), "playName"),
        org_id=validation.text(body.get("orgId"), "orgId", optional=True),
        input=body.get("input"),
        launch=validate_launch_json(body.get("launch", {})),
        max_attempts=validation.integer(body.get("maxAttempts", 3), "maxAttempts", minimum=1, maximum=100),
        run_log_store=validation.choice(body.get("runLogStore"), "runLogStore", ("planet_scale",), optional=True),
        graph_hash=validation.text(body.get("graphHash"), "graphHash", optional=True),
        runtime_profile=validation.text(body.get("runtimeProfile"), "runtimeProfile", optional=True),
        definition_scope=validation.choice(body.get("definitionScope"), "definitionScope", ("org", "system"), optional=True),
        wait_deadline=wait_deadline,
    )


def launch_run(request: LaunchRequest) -> str:
    """RUN-1/ADM-5: insert a queued run and run.created, refused while its release reads closed."""
    launch = request.launch or {}
    release_id = launch.get("absurdReleaseId")
    keys = admission.admission_keys(release_id, launch.get("environment")) if release_id else []
    run_id = f"run_{uuid.uuid4().hex}"
    with transaction.atomic():
        admission.lock_keys(keys)
        row = db.fetch_one(
            "runs_launch",
            {
                "release_keys": keys,
                "run_id": run_id,
                "org_id": request.org_id,
                "play_name": request.play_name,
                "graph_hash": request.graph_hash,
                "runtime_profile": request.runtime_profile,
                "definition_scope": request.definition_scope,
                "launch": json.dumps(launch),
                "input": _json(request.input),
                "run_log_store": request.run_log_store,
                "max_attempts": request.max_attempts,
                "wait_deadline": request.wait_deadline,
            },
        )
    if row["release_closed"]:
        raise ReleaseClosed(f'release "{release_id}" is closed to new runs')
    return row["run_id"]


@dataclass(frozen=True)
class Claim:
    run_id: str
    attempt: int
    lease_token: str
    lease_expires_at: dt.datetime
    org_id: str | None
    play_name: str
    input: Any
    launch: dict


def claim_runs(limit: int = 1, lease_seconds: float | None = None) -> list[Claim]:
    """RUN-2: claim up to `limit` queued runs (SKIP LOCKED)."""
    rows = db.fetch_all(
        "runs_claim_queued",
        {"limit": limit, "lease_seconds": lease_seconds or scheduler_settings.CLAIM_LEASE_SECONDS},
    )
    return [
        Claim(r["run_id"], r["attempt"], r["lease_token"], r["lease_expires_at"], r["org_id"], r["play_name"],
              r["input_json"], r["launch_json"] or {})
        for r in rows
    ]


def park(
    run_id: str,
    attempt: int,
    lease_token: str,
    sandbox_ref: dict,
    *,
    heartbeat_timeout_ms: int,
    started_at_ms: int,
    resource: dict | None = None,
    wait_deadline: dt.datetime | None = None,
) -> bool:
    """RUN-3: the attempt and run wait on the detached runner in its sandbox."""
    suspension = {
        "kind": "detached_runner",
        "runnerAttempt": attempt,
        "runtimeSandboxRef": sandbox_ref,
        "sandboxProvider": sandbox_ref.get("provider"),
        "startedAtMs": started_at_ms,
        "heartbeatTimeoutMs": heartbeat_timeout_ms,
    }
    row = db.fetch_one(
        "runs_park",
        {
            "run_id": run_id,
            "attempt": attempt,
            "lease_token": lease_token,
            "suspension": json.dumps(suspension),
            "resource": _json(resource),
            "wait_deadline": wait_deadline,
        },
    )
    return bool(row["parked"])


def heartbeat(run_id: str, attempt: int, lease_token: str) -> dict:
    """RUN-4: bump the current attempt's heartbeat; report currency and a queued cancel."""
    row = db.fetch_one("attempts_heartbeat", {"run_id": run_id, "attempt": attempt, "lease_token": lease_token})
    return {
        "current": row["current"],
        "cancelRequested": row["cancel_requested"],
        "heartbeatIdentity": row["heartbeat_identity"],
    }


def cancel_run(run_id: str, reason: str = "cancel_requested") -> dict:
    """RUN-7: queue the cancel; a queued run is cancelled directly."""
    row = db.fetch_one("runs_cancel", {"run_id": run_id, "reason": reason})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    return {
        "runId": run_id,
        "priorStatus": row["prior_status"],
        "cancelQueued": row["cancel_queued"],
        "cancelledNow": row["cancelled"],
    }


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def run_status(run_id: str, *, include_definition_scope: bool = False) -> dict:
    """RUN-8: the status snapshot; no launch secrets, schema as queried."""
    row = db.fetch_one("runs_read_status", {"run_id": run_id})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    snapshot = {
        "runId": row["run_id"],
        "orgId": row["org_id"],
        "status": row["status"],
        "playName": row["play_name"],
        "graphHash": row["graph_hash"],
        "runtimeBackend": row["runtime_backend"],
        "createdAt": _iso(row["created_at"]),
        "updatedAt": _iso(row["updated_at"]),
        "startedAt": _iso(row["started_at"]),
        "finishedAt": _iso(row["finished_at"]),
        "attempts": row["attempts"],
        "schedulerSchema": row["scheduler_schema"],
    }
    if row["run_log_store"] == "planet_scale":
        snapshot["runLogStore"] = "planet_scale"
    if include_definition_scope:
        snapshot["definitionScope"] = row["definition_scope"]
    return snapshot


def attempt_standing(run_id: str, attempt: int) -> dict | None:
    """RUN-5: {runStatus, attemptStatus|null, superseded}; None when the run is missing."""
    row = db.fetch_one("attempts_read_standing", {"run_id": run_id, "attempt": attempt})
    if row is None:
        return None
    return {"runStatus": row["run_status"], "attemptStatus": row["attempt_status"], "superseded": row["superseded"]}


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
