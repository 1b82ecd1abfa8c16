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

import psycopg

from scheduler import db, observability
from scheduler.kinds import TERMINAL_FACT_TYPES, Lane
from scheduler.outbox.facts import Fact, Prefix

# What a store refuses for the data it was given (not for a lost connection): the failure policy's to count.
STORE_ERRORS = (psycopg.DataError, psycopg.IntegrityError, ValueError, TypeError)


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


def _events(batch: list[tuple[Prefix, list[Fact]]]) -> tuple[str, list[str]]:
    """The ledger events of `batch` as the store statements take them (JSON), and their fact ids."""
    events, event_ids = [], []
    for prefix, facts in batch:
        for fact in facts:
            event = ledger_event(fact)
            events.append({"event_id": event["eventId"], "run_id": prefix.run_id, "event_type": event["type"],
                           "occurred_at": event["occurredAt"], "payload": event["payload"]})
            event_ids.append(fact.event_id)
    return json.dumps(events), event_ids


def validate_search(prefix: Prefix) -> None:
    """A search-lane prefix is only checked to make ledger events: the search projection reads the outbox itself."""
    for fact in prefix.facts:
        ledger_event(fact)


def store_and_acknowledge(lease_owner: str, batch: list[tuple[Prefix, list[Fact]]]) -> set[str]:
    """Store in the built-in receiver and acknowledge, for several runs, in one statement (OBX-10).

    Returns the event ids acknowledged (a fact whose lease was lost is stored
    but not acknowledged by this drainer)."""
    events, event_ids = _events(batch)
    if not event_ids:
        return set()
    row = db.fetch_one("run_ledger_store_and_ack", {"events": events, "event_ids": event_ids,
                                                     "lease_owner": lease_owner})
    return set(row["acked_event_ids"])


def acknowledge_in_place(lease_owner: str, prefixes: list[Prefix]) -> None:
    """Deliver prefixes bound for this database inside the claim's transaction, under their runs' locks.

    Why: a lease only protects a delivery that outlives its claim; here the
    claim's own commit delivers, so a lease would be one more index-wide
    update of every fact and one more commit. The built-in receiver stores
    and acknowledges the ledger lane's prefixes in one statement; the search
    lane's are validated and acknowledged. Each prefix's
    acknowledged_in_place says how many of its facts were acknowledged.
    """
    acked: set[str] = set()
    ledger = [prefix for prefix in prefixes if prefix.lane == Lane.LEDGER]
    search = [prefix for prefix in prefixes if prefix.lane != Lane.LEDGER]
    if ledger:
        facts = [fact for prefix in ledger for fact in prefix.facts]
        # Only a terminal's payload may differ from the outbox's (TRM-6); the statement copies the rest itself.
        payloads = {fact.event_id: ledger_event(fact)["payload"] for fact in facts
                    if fact.event_type in TERMINAL_FACT_TYPES}
        with observability.DELIVERY_SECONDS.labels("builtin").time():
            row = db.fetch_one("run_ledger_store_and_ack_in_place", {
                "event_ids": [fact.event_id for fact in facts], "payloads": json.dumps(payloads),
                "lease_owner": lease_owner})
        acked.update(row["acked_event_ids"])
    if search:
        for prefix in search:
            validate_search(prefix)
        acked.update(row["event_id"] for row in db.fetch_all("outbox_ack_in_place", {
            "event_ids": [event_id for prefix in search for event_id in prefix.fact_ids], "lease_owner": lease_owner}))
    for prefix in prefixes:
        prefix.acknowledged_in_place = sum(1 for event_id in prefix.fact_ids if event_id in acked)


def store_events(rows: list[dict]) -> int:
    """POST /internal/run-ledger/events: store validated events; returns how many were new."""
    return len(db.fetch_all("run_ledger_store_events", {"events": json.dumps(rows)}))
