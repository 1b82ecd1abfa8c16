"""Request bodies of durable waits (WAIT-1, WAIT-3) into domain values; each check names the field."""

from __future__ import annotations

import datetime as dt
from typing import Any

from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.kinds import WaitKind, values
from scheduler.runs import receipts
from scheduler.waits.suspension import Wait
from scheduler.waits.wakeups import Event

# The longest a wait may be asked to last: a year (a deadline further out is a mistake, not a plan).
MAX_WAIT_MS = 366 * 86_400_000


def wait_request(body: dict) -> Wait:
    """POST /internal/runner/waits/begin: {key, kind: event|timer, event (an event wait), delayMs | untilMs}."""
    key = receipts.check_key(validation.field(body, "key"), "key")
    receipts.assert_mutable([key], ["key"])
    kind = WaitKind(validation.choice(validation.field(body, "kind"), "kind", values(WaitKind)))
    event_name = None
    if kind == WaitKind.EVENT:
        event_name = validation.text(validation.field(body, "event"), "event", max_length=200)
    elif body.get("event") is not None:
        raise InvalidInput("event names what an event wait waits for; a timer has none", field="event")
    delay_ms, until = body.get("delayMs"), body.get("untilMs")
    if delay_ms is not None and until is not None:
        raise InvalidInput("give delayMs or untilMs, not both", field="untilMs")
    if kind == WaitKind.TIMER and delay_ms is None and until is None:
        raise InvalidInput("a timer needs delayMs or untilMs", field="delayMs")
    if delay_ms is not None:
        delay_ms = validation.integer(delay_ms, "delayMs", maximum=MAX_WAIT_MS)
    return Wait(key, kind, event_name, delay_ms, _instant(until) if until is not None else None)


def _instant(value: Any) -> dt.datetime:
    millis = validation.integer(value, "untilMs", maximum=validation.MAX_SAFE_INTEGER)
    try:
        return dt.datetime.fromtimestamp(millis / 1000, dt.UTC)
    except (OverflowError, OSError, ValueError):
        raise InvalidInput("untilMs is not a time this scheduler can keep", field="untilMs") from None


def event_request(run_id: str, body: dict) -> Event:
    """POST /internal/runs/{id}/events: {name, payload, eventId}; unknown fields are refused by name."""
    unknown = sorted(set(body) - {"name", "payload", "eventId"})
    if unknown:
        raise InvalidInput(f"{unknown[0]} is not a field of an event (name, payload, eventId)", field=unknown[0])
    return Event.checked(run_id, validation.field(body, "name"), body.get("payload"), body.get("eventId"))
