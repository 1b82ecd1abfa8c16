"""The body of a launch (RUN-1) into a LaunchRequest: each check names the field, and nothing is written before it
passes. `POST /internal/runs` and `launch_run` read their bodies here, and a schedule its stored launch template
(SCD-1), so the API and the schedules read a launch alike.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.kinds import Environment, values
from scheduler.runs import launch_rules
from scheduler.runs.lifecycle import Concurrency, LaunchRequest

URL_KEYS = ("runtimeApiBaseUrl", "baseUrl", "arrayInputTerminalProjectionOrigin")
TOKEN_KEYS = ("executorToken", "coordinatorInternalToken", "vercelProtectionBypassToken")


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
            raise InvalidInput(f"launch.{key} must be a string", field=f"launch.{key}")
    if "arrayInputTerminalRetirementSupported" in launch:
        validation.boolean(launch["arrayInputTerminalRetirementSupported"], "launch.arrayInputTerminalRetirementSupported")
    if "maxConcurrentExternalCalls" in launch:
        validation.integer(launch["maxConcurrentExternalCalls"], "launch.maxConcurrentExternalCalls", minimum=1)
    if launch.get("contractSnapshot") is not None:
        _launch_snapshot(launch["contractSnapshot"])
    launch_rules.check_placement(launch)
    return launch


def _instant(value: Any, name: str) -> dt.datetime | None:
    """An ISO 8601 timestamp with a zone (waitDeadline, runAfter), or None."""
    if value is None:
        return None
    try:
        instant = dt.datetime.fromisoformat(validation.text(value, name))
    except ValueError:
        raise InvalidInput(f"{name} must be an ISO 8601 timestamp", field=name) from None
    if instant.tzinfo is None:
        raise InvalidInput(f"{name} must carry a time zone", field=name)
    if not dt.datetime(1, 1, 2, tzinfo=dt.UTC) <= instant <= dt.datetime(9999, 12, 30, tzinfo=dt.UTC):
        raise InvalidInput(f"{name} is out of range", field=name)
    return instant


def _concurrency(value: Any) -> Concurrency | None:
    """FSH-2: {"key": text, "limit": 1..1000}."""
    if value is None:
        return None
    value = validation.json_object(value, "concurrency")
    unknown = sorted(set(value) - {"key", "limit"})
    if unknown:
        raise InvalidInput(f"concurrency.{unknown[0]} is not a concurrency field (key, limit)",
                           field=f"concurrency.{unknown[0]}")
    return Concurrency(key=validation.text(validation.field(value, "key", at="concurrency"), "concurrency.key",
                                           max_length=200),
                       limit=validation.integer(validation.field(value, "limit", at="concurrency"), "concurrency.limit",
                                                minimum=1, maximum=1000))


SCHEDULE_KEY_PREFIX = "schedule:"


def launch_request(body: Any, *, scheduled: bool = False) -> LaunchRequest:
    """RUN-1: the body of POST /internal/runs (and of `launch_run`)."""
    body = validation.storable(validation.json_object(body, "body"))
    launch = launch_json(body.get("launch", {}))
    play_name = validation.text(validation.field(body, "playName"), "playName")
    if launch.get("play") is None and not launch_rules.PLAY_CALLABLE.fullmatch(play_name):
        raise InvalidInput('playName must read module:function (or the launch names its play: launch.play)',
                           field="playName")
    idempotency_key = validation.text(body.get("idempotencyKey"), "idempotencyKey", optional=True, max_length=200)
    if not scheduled and idempotency_key is not None and idempotency_key.startswith(SCHEDULE_KEY_PREFIX):
        # SCD-7: a schedule's fire takes `schedule:<id>:<slot>`; a launch that took it first would swallow the fire.
        raise InvalidInput(f"idempotencyKey may not start with {SCHEDULE_KEY_PREFIX!r}: that namespace is the "
                           "schedules' own", field="idempotencyKey")
    return LaunchRequest(
        play_name=play_name,
        org_id=validation.identifier(body.get("orgId"), "orgId", optional=True),
        input=body.get("input"),
        launch=launch,
        max_attempts=validation.integer(body.get("maxAttempts", 3), "maxAttempts", minimum=1, maximum=100),
        run_log_store=validation.choice(body.get("runLogStore"), "runLogStore", ("planet_scale",), optional=True),
        graph_hash=validation.text(body.get("graphHash"), "graphHash", optional=True),
        runtime_profile=validation.text(body.get("runtimeProfile"), "runtimeProfile", optional=True),
        definition_scope=validation.choice(body.get("definitionScope"), "definitionScope", ("org", "system"),
                                           optional=True),
        wait_deadline=_instant(body.get("waitDeadline"), "waitDeadline"),
        idempotency_key=idempotency_key,
        priority=validation.integer(body.get("priority", 0), "priority", minimum=-100, maximum=100),
        concurrency=_concurrency(body.get("concurrency")),
        run_after=_instant(body.get("runAfter"), "runAfter"),
    )
