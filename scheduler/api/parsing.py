"""Request bodies into domain values: each check names the field, and nothing is written before it passes.

The API's views and the commands that take the same JSON (launch_run) parse
here; the domain (scheduler/runs/) receives typed values only.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.kinds import Environment, ResultStatus, values
from scheduler.runs.lifecycle import LaunchRequest
from scheduler.runs.settlement import Settlement

URL_KEYS = ("runtimeApiBaseUrl", "baseUrl", "arrayInputTerminalProjectionOrigin")
TOKEN_KEYS = ("executorToken", "coordinatorInternalToken", "vercelProtectionBypassToken")
MAX_PROGRESS_EVENTS = 200


def _launch_snapshot(snapshot: Any) -> None:
    snapshot = validation.json_object(snapshot, "launch.contractSnapshot")
    compatibility = validation.json_object(snapshot.get("compatibility", {}), "launch.contractSnapshot.compatibility")
    for key in ("terminalRuntimePerformanceSupported", "terminalRuntimeBodyAdmissionSupported"):
        if key in compatibility:
            validation.boolean(compatibility[key], f"launch.contractSnapshot.compatibility.{key}")
    sandbox = validation.json_object(snapshot.get("sandbox", {}), "launch.contractSnapshot.sandbox")
    if "timeoutSeconds" in sandbox:
        validation.integer(sandbox["timeoutSeconds"], "launch.contractSnapshot.sandbox.timeoutSeconds", minimum=1)


def launch_json(launch: Any) -> dict:
    """requirements §1.8: the launch keys the scheduler reads must have their types."""
    launch = validation.json_object(launch, "launch")
    if "absurdReleaseId" in launch:
        validation.text(launch["absurdReleaseId"], "launch.absurdReleaseId")
    if "environment" in launch:
        validation.choice(launch["environment"], "launch.environment", values(Environment))
    for key in URL_KEYS + TOKEN_KEYS:
        if key in launch and launch[key] is not None and not isinstance(launch[key], str):
            raise InvalidInput(f"launch.{key} must be a string")
    if "arrayInputTerminalRetirementSupported" in launch:
        validation.boolean(launch["arrayInputTerminalRetirementSupported"], "launch.arrayInputTerminalRetirementSupported")
    if "maxConcurrentExternalCalls" in launch:
        validation.integer(launch["maxConcurrentExternalCalls"], "launch.maxConcurrentExternalCalls", minimum=1)
    if launch.get("contractSnapshot") is not None:
        _launch_snapshot(launch["contractSnapshot"])
    return launch


def _wait_deadline(value: Any) -> dt.datetime | None:
    if value is None:
        return None
    try:
        deadline = dt.datetime.fromisoformat(validation.text(value, "waitDeadline"))
    except ValueError:
        raise InvalidInput("waitDeadline must be an ISO 8601 timestamp") from None
    if deadline.tzinfo is None:
        raise InvalidInput("waitDeadline must carry a time zone")
    return deadline


def launch_request(body: Any) -> LaunchRequest:
    """RUN-1: the body of POST /internal/runs (and of `launch_run`)."""
    body = validation.json_object(body, "body")
    return LaunchRequest(
        play_name=validation.text(validation.field(body, "playName"), "playName"),
        org_id=validation.text(body.get("orgId"), "orgId", optional=True),
        input=body.get("input"),
        launch=launch_json(body.get("launch", {})),
        max_attempts=validation.integer(body.get("maxAttempts", 3), "maxAttempts", minimum=1, maximum=100),
        run_log_store=validation.choice(body.get("runLogStore"), "runLogStore", ("planet_scale",), optional=True),
        graph_hash=validation.text(body.get("graphHash"), "graphHash", optional=True),
        runtime_profile=validation.text(body.get("runtimeProfile"), "runtimeProfile", optional=True),
        definition_scope=validation.choice(body.get("definitionScope"), "definitionScope", ("org", "system"),
                                           optional=True),
        wait_deadline=_wait_deadline(body.get("waitDeadline")),
    )


def terminal_result(result: Any) -> dict:
    """TRM-1: the runner envelope: status completed (with output) or failed (with error {code, message})."""
    result = validation.json_object(result, "result")
    status = validation.choice(result.get("status"), "result.status", values(ResultStatus))
    if status == ResultStatus.FAILED:
        error = validation.json_object(result.get("error"), "result.error")
        validation.text(error.get("code"), "result.error.code", max_length=128)
        if not isinstance(error.get("message", ""), str):
            raise InvalidInput("result.error.message must be a string")
    if "stats" in result and result["stats"] is not None and not isinstance(result["stats"], dict):
        raise InvalidInput("result.stats must be a JSON object")
    return result


def progress_events(events: Any) -> list:
    if events is None:
        return []
    if not isinstance(events, list) or not all(isinstance(event, dict) for event in events):
        raise InvalidInput("terminalProgressEvents must be a list of JSON objects")
    if len(events) > MAX_PROGRESS_EVENTS:
        raise InvalidInput(f"terminalProgressEvents holds at most {MAX_PROGRESS_EVENTS} events")
    return events


def runner_identity(body: dict) -> tuple[str, int, str]:
    """The (runId, attempt, leaseToken) every runner request names."""
    run_id = validation.text(validation.field(body, "runId"), "runId")
    attempt = validation.integer(validation.field(body, "attempt"), "attempt", minimum=1)
    lease_token = validation.text(validation.field(body, "leaseToken"), "leaseToken")
    return run_id, attempt, lease_token


def runner_terminal(body: dict) -> Settlement:
    """TRM-1..4: the body of POST /internal/runner/terminal, as the settlement it asks for."""
    run_id, attempt, lease_token = runner_identity(body)
    return Settlement(run_id, attempt, lease_token, terminal_result(validation.field(body, "result")),
                      progress_events(body.get("terminalProgressEvents")), body.get("logPayload"), from_runner=True)
