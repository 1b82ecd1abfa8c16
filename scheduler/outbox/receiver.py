"""What a run ledger receives (TRM-6), and the built-in receiver: this database (OBX-10).

A fact becomes a ledger event `{eventId, type, occurredAt, payload}`; a
terminal's runtime performance that is not a set of safe counts is replaced
by the reason it is unavailable. The built-in receiver stores events in
`run_ledger_events`, idempotently by event id, and acknowledges the facts in
the same statement.
"""

from __future__ import annotations

import datetime as dt
import json

from scheduler import db
from scheduler.kinds import TERMINAL_FACT_TYPES
from scheduler.outbox.claims import Fact, Prefix


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 - 1


def valid_performance(value) -> bool:
    return (isinstance(value, dict) and all(_count(value.get(key)) for key in ("cpuMs", "wallMs", "peakMemoryBytes"))
            and ("memoryAdmission" not in value or isinstance(value["memoryAdmission"], dict)))


def ledger_event(fact: Fact) -> dict:
    payload = dict(fact.payload or {})
    # TRM-6: only a present, non-null, invalid value is replaced; a null beside a stored reason (what an older
    # writer sends) keeps that reason.
    if fact.event_type in TERMINAL_FACT_TYPES and payload.get("terminalRuntimePerformance") is not None:
        if not valid_performance(payload["terminalRuntimePerformance"]):
            payload.pop("terminalRuntimePerformance")
            payload["terminalRuntimePerformanceUnavailableReason"] = "invalid_terminal_performance"
    return {"eventId": fact.event_id, "type": fact.event_type,
            "occurredAt": fact.created_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"), "payload": payload}


def store_and_acknowledge(lease_owner: str, batch: list[tuple[Prefix, list[Fact]]]) -> set[str]:
    """Store in the built-in receiver and acknowledge, for several runs, in one statement (OBX-10).

    Returns the event ids acknowledged (a fact whose lease was lost is stored
    but not acknowledged by this drainer)."""
    events, event_ids = [], []
    for prefix, facts in batch:
        for fact in facts:
            event = ledger_event(fact)
            events.append({"event_id": event["eventId"], "run_id": prefix.run_id, "event_type": event["type"],
                           "occurred_at": event["occurredAt"], "payload": event["payload"]})
            event_ids.append(fact.event_id)
    if not events:
        return set()
    row = db.fetch_one("run_ledger_store_and_ack", {"events": json.dumps(events), "event_ids": event_ids,
                                                     "lease_owner": lease_owner})
    return set(row["acked_event_ids"])


def store_events(rows: list[dict]) -> int:
    """POST /internal/run-ledger/events: store validated events; returns how many were new."""
    return len(db.fetch_all("run_ledger_store_events", {"events": json.dumps(rows)}))
