"""An external run-ledger receiver over HTTP (OBX-6, OBX-8): the launch's runtime API or its terminal origin.

Events go to `POST {receiver}/api/v2/internal/play-runtime/run-ledger/events`
(Bearer token; `{runId, events: [{eventId, type, occurredAt, payload}]}`),
the whole route in one request when prefix batching was granted, else one
fact per request in causal order; the runs of a claim are delivered several
at once, each run's requests on one thread. Any 2xx delivers what it
carried; a 401 drops the authority (authority.py: the token, its cache,
what may be batched) and mints a dispatch token once. After a partial delivery the
outcome names the facts that arrived, and the failure is counted on the
first fact that did not. No credential reaches an error message or a log.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from django.db import connections

from scheduler import call_pools, db, observability
from scheduler.conf import scheduler_settings
from scheduler.faults import describe
from scheduler.kinds import TERMINAL_FACT_TYPES, ReceiverKind
from scheduler.outbox.facts import Fact, Prefix
from scheduler.outbox.receivers import authority
from scheduler.outbox.receivers.interface import Outcome, Receiver, ledger_event
from scheduler.outbox.routing import DeliveryError

logger = logging.getLogger("scheduler.drain")
EVENTS_PATH = "/api/v2/internal/play-runtime/run-ledger/events"


def _send(base: str, prefix: Prefix, batch: list[Fact], held: authority.Authority) -> int:
    body = {"runId": prefix.run_id, "events": [ledger_event(fact) for fact in batch]}
    status, _ = authority.post(base.rstrip("/") + EVENTS_PATH, held.token, body, prefix.dispatch_launch or {})
    return status


def _deliver_one(outcome: Outcome) -> None:
    """Send the route's facts, batched only when granted; `outcome.delivered` grows with each 2xx."""
    prefix, base, facts = outcome.prefix, outcome.prefix.route.base_url, outcome.prefix.route.facts
    terminal_projection = any(fact.event_type in TERMINAL_FACT_TYPES for fact in facts)
    origin = prefix.route.terminal_origin if terminal_projection else None
    held = authority.resolve(prefix, base, terminal_projection=terminal_projection, terminal_origin=origin)
    minted_again = False
    for batch in [facts] if held.prefix_batching else [[fact] for fact in facts]:
        status = _send(base, prefix, batch, held)
        if status == 401 and not minted_again:
            authority.refused(prefix, held)
            minted_again = True
            held = authority.resolve(prefix, base, terminal_projection=terminal_projection, terminal_origin=origin,
                                     fresh=True)
            status = _send(base, prefix, batch, held)
        if not 200 <= status < 300:
            raise DeliveryError(f"run-ledger receiver answered {status}")
        outcome.delivered += batch


@contextlib.contextmanager
def leases_kept(lease_owner: str, fact_ids: list[str], lease_seconds: float):
    """While the block runs (deliveries in flight), extend these leases every third of a lease.

    So a slow receiver never outlasts a lease and no other drainer delivers
    the same facts meanwhile; a drainer that dies stops extending, and its
    leases expire as before.
    """
    stop = threading.Event()

    def keep() -> None:
        try:
            while not stop.wait(lease_seconds / 3):
                db.execute("outbox_extend_leases", {"event_ids": fact_ids, "lease_owner": lease_owner,
                                                    "lease_seconds": lease_seconds})
        except Exception as error:  # noqa: BLE001 - the leases then simply expire, as after a crash
            logger.warning("drain %s: could not extend its leases: %s", lease_owner, describe(error))
        finally:
            connections.close_all()

    keeper = threading.Thread(target=keep, name=f"leases-{lease_owner}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()


class LedgerHttp(Receiver):
    kind = ReceiverKind.HTTP

    def deliver(self, prefixes: list[Prefix]) -> list[Outcome]:
        """Each run's route in requests of its own (the protocol is per run), up to SCHEDULER_DELIVERY_CONCURRENCY
        runs at once, each timed and counted per receiver origin; meanwhile every prefix's leases are kept alive,
        so a slow receiver never outlasts them."""
        outcomes = [Outcome(prefix) for prefix in prefixes]
        if not prefixes:
            return outcomes
        fact_ids = [fact_id for prefix in prefixes for fact_id in prefix.fact_ids]
        size = scheduler_settings.delivery_concurrency
        with leases_kept(prefixes[0].lease_owner, fact_ids, min(prefix.lease_seconds for prefix in prefixes)):
            if size > 1 and len(outcomes) > 1:
                # A run's facts stay in one thread, in causal order; different runs owe each other no order (OBX-1).
                list(call_pools.shared("delivery", size).map(_deliver_timed, outcomes))
            else:
                for outcome in outcomes:
                    _deliver_timed(outcome)
        return outcomes


def _deliver_timed(outcome: Outcome) -> None:
    """Deliver one run's route; whatever goes wrong becomes its outcome's error, settled by the failure policy."""
    label = observability.receiver_label(outcome.prefix.route.base_url)
    try:
        with observability.DELIVERY_SECONDS.labels(label).time():
            _deliver_one(outcome)
    except Exception as error:  # noqa: BLE001 - settled through the failure policy
        observability.DELIVERY_FAILURES.labels(label).inc()
        outcome.error = error
