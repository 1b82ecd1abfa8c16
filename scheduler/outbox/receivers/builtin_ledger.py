"""The built-in receiver (OBX-10): this database's run_ledger_events, for launches that name no receiver.

One statement stores and acknowledges: it copies the facts from the outbox
into the ledger idempotently by event id (only a terminal's payload, which
TRM-6 may rewrite, is sent along) and acknowledges them, in the same
statement. The same statement serves a prefix read inside the claim's
transaction (no lease: the claim's own commit delivers it, so a lease would
be one more update of every fact and one more commit), a leased prefix, and
the events other schedulers post to POST /internal/run-ledger/events.
"""

from __future__ import annotations

import json

from scheduler import db, observability
from scheduler.kinds import TERMINAL_FACT_TYPES, ReceiverKind
from scheduler.outbox.facts import Prefix
from scheduler.outbox.receivers.interface import STORE_ERRORS, Outcome, Receiver, ledger_event


def _store(lease_owner: str, event_ids: list[str], payloads: dict, events: list[dict] = ()) -> dict:
    return db.fetch_one("run_ledger_store_and_ack", {
        "events": json.dumps(list(events)), "event_ids": event_ids, "payloads": json.dumps(payloads),
        "lease_owner": lease_owner})


def _store_prefixes(prefixes: list[Prefix]) -> set[str]:
    """Store and acknowledge every prefix's route in one statement; the fact ids acknowledged."""
    facts = [fact for prefix in prefixes for fact in prefix.route.facts]
    payloads = {fact.event_id: ledger_event(fact)["payload"] for fact in facts if fact.event_type in TERMINAL_FACT_TYPES}
    with observability.DELIVERY_SECONDS.labels("builtin").time():
        row = _store(prefixes[0].lease_owner, [fact.event_id for fact in facts], payloads)
    return set(row["acked_event_ids"])


class BuiltinLedger(Receiver):
    kind = ReceiverKind.BUILTIN

    def deliver(self, prefixes: list[Prefix]) -> list[Outcome]:
        """All runs in one statement. Inside the claim a refusal propagates (the claim leases instead); a
        leased batch the statement refuses is stored run by run, so only the run that cannot be stored fails."""
        outcomes = [Outcome(prefix) for prefix in prefixes]
        if not prefixes:
            return outcomes
        try:
            acked = _store_prefixes(prefixes)
        except STORE_ERRORS as error:
            if not all(prefix.leased for prefix in prefixes):
                raise
            if len(prefixes) > 1:
                return [outcome for prefix in prefixes for outcome in self.deliver([prefix])]
            outcomes[0].error = error
            return outcomes
        for outcome in outcomes:
            outcome.acknowledged = sum(1 for fact in outcome.prefix.route.facts if fact.event_id in acked)
        return outcomes


def store_posted_events(rows: list[dict]) -> int:
    """POST /internal/run-ledger/events: store validated events (acknowledging nothing); how many were new."""
    return int(_store("", [], {}, rows)["stored"])
