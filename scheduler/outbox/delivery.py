"""Deliver a claimed prefix to its run-ledger receiver (OBX-6, OBX-8, OBX-10, TRM-6).

Routing is routing.py's (the launch's receiver, the terminal projection
origin, or the built-in receiver); the token, what may be batched and the
pooled HTTP client per receiver origin are authority.py's. Events go to `POST {receiver}/api/v2/internal/play-runtime/run-ledger/events`
(Bearer token; `{runId, events: [{eventId, type, occurredAt, payload}]}`), the
whole route in one request when prefix batching was granted, else one fact
per request in causal order. Any 2xx acknowledges what it carried; a 401
drops the authority and mints a dispatch token once. After a partial
delivery the delivered facts are acknowledged and the failure is counted on
the first fact that was not. The `search` lane only feeds the scheduler's
own projection: it is validated and acknowledged without contacting any
receiver or reading launch credentials. No credential reaches an error
message or a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scheduler import observability
from scheduler.kinds import TERMINAL_FACT_TYPES, Lane
from scheduler.outbox import authority, claims, receiver
from scheduler.outbox.facts import Fact, Prefix
from scheduler.outbox.receiver import ledger_event
from scheduler.outbox.routing import (  # noqa: F401 - the delivery's public names
    STAGED_REFUSAL, DeliveryError, goes_over_http, is_immutable_origin, plan_routes, terminal_origin,
)

EVENTS_PATH = "/api/v2/internal/play-runtime/run-ledger/events"


class PartialDelivery(DeliveryError):
    """Some facts of a route were delivered before a request failed."""

    def __init__(self, message: str, delivered: list[Fact]):
        super().__init__(message)
        self.delivered = delivered


def _send(base: str, prefix: Prefix, batch: list[Fact], held: authority.Authority) -> int:
    body = {"runId": prefix.run_id, "events": [ledger_event(fact) for fact in batch]}
    status, _ = authority.post(base.rstrip("/") + EVENTS_PATH, held.token, body, prefix.dispatch_launch or {})
    return status


def deliver_http(base: str, prefix: Prefix, facts: list[Fact]) -> None:
    """Deliver `facts` (one route) to `base`, batched only when granted; PartialDelivery names what arrived."""
    terminal_projection = any(fact.event_type in TERMINAL_FACT_TYPES for fact in facts)
    origin = terminal_origin(prefix) if terminal_projection else None
    held = authority.resolve(prefix, base, terminal_projection=terminal_projection, terminal_origin=origin)
    batches = [facts] if held.prefix_batching else [[fact] for fact in facts]
    delivered: list[Fact] = []
    minted_again = False
    for batch in batches:
        status = _send(base, prefix, batch, held)
        if status == 401 and not minted_again:
            authority.refused(prefix, held)
            minted_again = True
            held = authority.resolve(prefix, base, terminal_projection=terminal_projection, terminal_origin=origin,
                                     fresh=True)
            status = _send(base, prefix, batch, held)
        if not 200 <= status < 300:
            raise PartialDelivery(f"run-ledger receiver answered {status}", delivered)
        delivered += batch


def _timed_http(base: str, prefix: Prefix, facts: list[Fact]) -> None:
    """deliver_http, timed and counted per receiver origin."""
    label = observability.receiver_label(base)
    try:
        with observability.DELIVERY_SECONDS.labels(label).time():
            deliver_http(base, prefix, facts)
    except Exception:
        observability.DELIVERY_FAILURES.labels(label).inc()
        raise


@dataclass
class Outcome:
    prefix: Prefix
    acknowledged: int = 0
    released: int = 0
    error: Exception | None = None
    failed_from: Prefix | None = None  # the facts the failure policy applies to (after a partial delivery)


def _deliver_routes(outcome: Outcome, builtin: list[tuple[Outcome, list[Fact]]]) -> None:
    prefix = outcome.prefix
    routes = plan_routes(prefix)
    sent = {fact.event_id for _, facts in routes for fact in facts}
    released = [fact.event_id for fact in prefix.facts if fact.event_id not in sent]
    for base, facts in routes:
        if base is None:
            builtin.append((outcome, facts))
            continue
        try:
            _timed_http(base, prefix, facts)
        except PartialDelivery as partial:
            if partial.delivered:
                outcome.acknowledged += len(claims.acknowledge(prefix.lease_owner,
                                                               [fact.event_id for fact in partial.delivered]))
                outcome.failed_from = replace(prefix, facts=prefix.facts[len(partial.delivered):])
            raise
        outcome.acknowledged += len(claims.acknowledge(prefix.lease_owner, [fact.event_id for fact in facts]))
    if released:
        outcome.released = claims.release(prefix, released)


def _store_builtin(builtin: list[tuple[Outcome, list[Fact]]]) -> None:
    """Store and acknowledge in the built-in receiver, all runs in one statement; when that statement refuses
    the data, run by run, so only the run that cannot be stored meets the failure policy."""
    try:
        with observability.DELIVERY_SECONDS.labels("builtin").time():
            acked = receiver.store_and_acknowledge(builtin[0][0].prefix.lease_owner,
                                                   [(outcome.prefix, facts) for outcome, facts in builtin])
    except receiver.STORE_ERRORS as error:
        if len(builtin) == 1:
            builtin[0][0].error = error
            return
        for one in builtin:
            _store_builtin([one])
        return
    for outcome, facts in builtin:
        outcome.acknowledged += sum(1 for fact in facts if fact.event_id in acked)


def deliver_all(prefixes: list[Prefix]) -> list[Outcome]:
    """Deliver claimed prefixes: external receivers one run at a time (the protocol is per run),
    the built-in receiver and the search lane in one statement each."""
    outcomes = [Outcome(prefix) for prefix in prefixes]
    builtin: list[tuple[Outcome, list[Fact]]] = []
    search: list[Outcome] = []
    for outcome in outcomes:
        if outcome.prefix.acknowledged_in_place is not None:
            outcome.acknowledged = outcome.prefix.acknowledged_in_place  # the claim delivered it (receiver.py)
            continue
        if outcome.prefix.lane == Lane.SEARCH:
            receiver.validate_search(outcome.prefix)
            search.append(outcome)
            continue
        try:
            _deliver_routes(outcome, builtin)
        except Exception as error:  # noqa: BLE001 - settled by the caller through the failure policy
            outcome.error = error
    if builtin:
        _store_builtin(builtin)
    if search:
        acked = claims.acknowledge(search[0].prefix.lease_owner, [eid for outcome in search for eid in outcome.prefix.fact_ids])
        for outcome in search:
            outcome.acknowledged = sum(1 for event_id in outcome.prefix.fact_ids if event_id in acked)
    return outcomes
