"""The built-in run-ledger receiver (OBX-10): stores delivered facts idempotently by event id."""

import datetime as dt

from django.http import JsonResponse

from scheduler import validation
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, json_body
from scheduler.errors import InvalidInput
from scheduler.outbox.receivers import builtin_ledger

MAX_EVENTS = 100


def _timestamp(value, name):
    text = validation.text(value, name)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} must be an ISO 8601 timestamp", field=name) from None
    if parsed.tzinfo is None:
        raise InvalidInput(f"{name} must carry a time zone", field=name)
    return parsed.isoformat()


@api_view("POST")
def run_ledger_events(request):
    require_internal_token(request)
    body = json_body(request)
    run_id = validation.text(validation.field(body, "runId"), "runId")
    events = validation.field(body, "events")
    if not isinstance(events, list) or not 1 <= len(events) <= MAX_EVENTS:
        raise InvalidInput(f"events must be a list of 1 to {MAX_EVENTS} events", field="events")
    rows = []
    for index, event in enumerate(events):
        event = validation.json_object(event, f"events[{index}]")
        rows.append({
            "event_id": validation.text(validation.field(event, "eventId"), f"events[{index}].eventId"),
            "run_id": run_id,
            "event_type": validation.text(validation.field(event, "type"), f"events[{index}].type"),
            "occurred_at": _timestamp(validation.field(event, "occurredAt"), f"events[{index}].occurredAt"),
            "payload": validation.json_object(event.get("payload", {}), f"events[{index}].payload"),
        })
    return JsonResponse({"stored": builtin_ledger.store_posted_events(rows), "received": len(rows)})
