"""Stage 3, deliver: what every run-ledger receiver implements, and what a run ledger receives (TRM-6).

A receiver takes claimed, routed prefixes and returns one Outcome each:
what it acknowledged itself (a receiver in this database stores and
acknowledges in one statement), what it delivered for the settle stage to
acknowledge (an external receiver), and the error the failure policy counts.
A receiver in this database (kinds.IN_DATABASE_RECEIVERS) may be handed
prefixes read (not leased) under their runs' locks, inside the claim's
transaction: it then raises instead of recording an error, so the claim rolls
back and leases instead.

A fact becomes a ledger event `{eventId, type, occurredAt, payload}`; a
terminal's runtime performance that is not a set of safe counts is replaced
by the reason it is unavailable.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import psycopg

from scheduler.kinds import TERMINAL_FACT_TYPES, ReceiverKind
from scheduler.outbox.facts import Fact, Prefix

# What a store refuses for the data it was given (not for a lost connection): the failure policy's to count.
STORE_ERRORS = (psycopg.DataError, psycopg.IntegrityError, ValueError, TypeError)


@dataclass
class Outcome:
    prefix: Prefix
    acknowledged: int = 0  # facts the receiver acknowledged in its own statement
    delivered: list[Fact] = field(default_factory=list)  # facts delivered, for the settle stage to acknowledge
    error: Exception | None = None  # counted on the first fact not delivered


class Receiver:
    kind: ReceiverKind

    def deliver(self, prefixes: list[Prefix]) -> list[Outcome]:
        """Deliver routed prefixes (each prefix.route.kind is this receiver's); one Outcome each, in order."""
        raise NotImplementedError


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
