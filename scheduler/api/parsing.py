"""Request bodies into domain values: each check names the field, and nothing is written before it passes.

The API's views and the commands that take the same JSON (launch_run) parse
here; the domain (scheduler/runs/) receives typed values only.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.kinds import QueuedBecause, ResultStatus, RunStatus, values
from scheduler.fairshare.limits import LimitsChange
from scheduler.operations.run_list import MAX_PAGE, RunFilter
from scheduler.runs import receipts
from scheduler.runs.settlement import Settlement

MAX_PROGRESS_EVENTS = 200


def terminal_result(result: Any) -> dict:
    """TRM-1: the runner envelope: status completed (with output), failed (with error {code, message}) or, WAIT-2,
    suspended (with wait {key})."""
    result = validation.json_object(result, "result")
    if "verdict" in result:
        # A verdict is the scheduler's word on an attempt (the sweep's, the dispatcher's, an operator's): a runner's
        # result that carried one could pass for it and turn the runner's own later result into a "late" one.
        raise InvalidInput("result.verdict is the scheduler's: a runner's result cannot carry one",
                           field="result.verdict")
    status = validation.choice(result.get("status"), "result.status", values(ResultStatus))
    if status == ResultStatus.SUSPENDED:  # WAIT-2: names the wait it ends on; the scheduler holds the wait itself
        wait = validation.json_object(result.get("wait"), "result.wait")
        receipts.check_key(wait.get("key"), "result.wait.key")
    if status == ResultStatus.FAILED:
        error = validation.json_object(result.get("error"), "result.error")
        validation.text(error.get("code"), "result.error.code", max_length=128)
        if not isinstance(error.get("message", ""), str):
            raise InvalidInput("result.error.message must be a string", field="result.error.message")
    if "stats" in result and result["stats"] is not None and not isinstance(result["stats"], dict):
        raise InvalidInput("result.stats must be a JSON object", field="result.stats")
    return result


def progress_events(events: Any) -> list:
    if events is None:
        return []
    if not isinstance(events, list) or not all(isinstance(event, dict) for event in events):
        raise InvalidInput("terminalProgressEvents must be a list of JSON objects", field="terminalProgressEvents")
    if len(events) > MAX_PROGRESS_EVENTS:
        raise InvalidInput(f"terminalProgressEvents holds at most {MAX_PROGRESS_EVENTS} events",
                           field="terminalProgressEvents")
    return events


def runner_identity(body: dict) -> tuple[str, int, str]:
    """The (runId, attempt, leaseToken) every runner request names."""
    run_id = validation.text(validation.field(body, "runId"), "runId")
    attempt = validation.integer(validation.field(body, "attempt"), "attempt", minimum=1, maximum=validation.MAX_INT32)
    lease_token = validation.text(validation.field(body, "leaseToken"), "leaseToken")
    return run_id, attempt, lease_token


def runner_terminal(body: dict, identity: tuple[str, int, str]) -> Settlement:
    """TRM-1..4: the body of POST /internal/runner/terminal (its identity already read), as the settlement it asks for."""
    run_id, attempt, lease_token = identity
    return Settlement(run_id, attempt, lease_token, terminal_result(validation.field(body, "result")),
                      progress_events(body.get("terminalProgressEvents")), body.get("logPayload"), from_runner=True)


def run_list_query(query) -> tuple[RunFilter, str | None, int]:
    """GET /internal/runs?status=&org=&release=&play=&created_after=&cursor=&limit=: each optional, each checked."""
    def text(name: str) -> str | None:
        value = query.get(name)
        return validation.text(value, name) if value not in (None, "") else None

    created_after = text("created_after")
    if created_after is not None:
        try:
            created_after = dt.datetime.fromisoformat(created_after)
        except ValueError:
            raise InvalidInput("created_after must be an ISO 8601 timestamp", field="created_after") from None
        if created_after.tzinfo is None:
            raise InvalidInput("created_after must carry a time zone", field="created_after")
    limit = text("limit") or "50"
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
        raise InvalidInput(f"limit must be an integer between 1 and {MAX_PAGE}", field="limit")
    status = validation.choice(text("status"), "status", values(RunStatus), optional=True)
    because = validation.choice(text("queued_because"), "queued_because", values(QueuedBecause), optional=True)
    org = validation.identifier(query.get("org") or None, "org", optional=True)
    return (RunFilter(status, org, text("release"), text("play"), created_after, because), text("cursor"),
            int(limit))


# RCP-1: what each receipt endpoint reads from an item: (a lease id required?, output?, error?).
RECEIPT_ITEM_FIELDS = {
    "claim": (None, False, False), "mark-queued": (None, False, False), "complete": (False, True, False),
    "skip": (False, False, False), "fail": (True, False, True), "release": (True, False, False),
    "heartbeat": (True, False, False),
}


def _receipt_item(raw: Any, at: str, operation: str) -> receipts.Item:
    raw = validation.json_object(raw, at or "body")
    prefix = f"{at}." if at else ""
    lease_required, with_output, with_error = RECEIPT_ITEM_FIELDS[operation]
    key = receipts.check_key(validation.field(raw, "key", at=at), f"{prefix}key")
    lease_id = None
    if lease_required is not None:
        lease_id = validation.text(raw.get("leaseId"), f"{prefix}leaseId", optional=not lease_required)
    error, final = None, False
    if with_error:
        error = validation.json_object(validation.field(raw, "error", at=at), f"{prefix}error")
        validation.text(error.get("code"), f"{prefix}error.code", max_length=128)
        if not isinstance(error.get("message", ""), str):
            raise InvalidInput(f"{prefix}error.message must be a string", field=f"{prefix}error.message")
        final = validation.boolean(raw.get("final", False), f"{prefix}final")
    output = validation.field(raw, "output", at=at) if with_output else None
    return receipts.Item(key, lease_id, output, error, final)


def receipt_call(body: dict, operation: str) -> tuple[list[receipts.Item], bool, dict]:
    """A receipt endpoint's body: one item (its fields at the top) or `receipts: [...]`, then the call's options.

    Answers (items, batch?, options); every key is checked, `sys:` ones refused (RCP-2), before anything runs.
    """
    batch = "receipts" in body
    if batch:
        raw_items = body["receipts"]
        if not isinstance(raw_items, list) or len(raw_items) > receipts.MAX_BATCH:
            raise InvalidInput(f"receipts must be a list of at most {receipts.MAX_BATCH} items", field="receipts")
        items = [_receipt_item(raw, f"receipts[{index}]", operation) for index, raw in enumerate(raw_items)]
        names = [f"receipts[{index}].key" for index in range(len(items))]
    else:
        items, names = [_receipt_item(body, "", operation)], ["key"]
    receipts.assert_mutable([item.key for item in items], names)
    options = {}
    if operation in ("claim", "heartbeat"):
        options["lease_ms"] = validation.integer(body.get("leaseMs", receipts.DEFAULT_LEASE_MS), "leaseMs",
                                                 minimum=receipts.LEASE_MS[0], maximum=receipts.LEASE_MS[1])
    if operation == "complete":
        options["return_output"] = validation.boolean(body.get("returnOutput", True), "returnOutput")
    return items, batch, options


LIMIT_FIELDS = {"maxActive": "max_active", "maxStartsPerMinute": "max_starts_per_minute", "paused": "paused",
                "reason": "reason", "weight": "weight"}


def limits_change(body: Any) -> LimitsChange:
    """FSH-10: the body of PUT /internal/orgs/{org_id}/limits: every field optional, null clears (unpauses)."""
    body = validation.storable(validation.json_object(body, "body"))
    unknown = sorted(set(body) - set(LIMIT_FIELDS))
    if unknown:
        raise InvalidInput(f"{unknown[0]} is not an org limit ({', '.join(LIMIT_FIELDS)})", field=unknown[0])
    wanted = {}
    for name in ("maxActive", "maxStartsPerMinute"):
        if name in body:
            wanted[LIMIT_FIELDS[name]] = (None if body[name] is None
                                          else validation.integer(body[name], name, maximum=validation.MAX_INT32))
    if "paused" in body:
        wanted["paused"] = False if body["paused"] is None else validation.boolean(body["paused"], "paused")
    if "reason" in body:
        wanted["reason"] = validation.text(body["reason"], "reason", optional=True, max_length=500)
    if "weight" in body:  # FSH-11; null: back to 1
        wanted["weight"] = 1 if body["weight"] is None else validation.integer(body["weight"], "weight", minimum=1,
                                                                               maximum=1000)
    return LimitsChange(**wanted)
