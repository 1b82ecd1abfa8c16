"""The search lane's receiver (OBX-2): the scheduler's own projection reads the outbox itself.

A search-lane prefix is only checked to make ledger events and then
acknowledged; no receiver is contacted and no launch credential is read.
Whether it was read inside the claim's transaction or leased, one statement
acknowledges it: facts nobody else holds a live lease on.
"""

from __future__ import annotations

from scheduler import db
from scheduler.kinds import ReceiverKind
from scheduler.outbox.facts import Prefix
from scheduler.outbox.receivers.interface import Outcome, Receiver, ledger_event


class SearchLane(Receiver):
    kind = ReceiverKind.SEARCH

    def deliver(self, prefixes: list[Prefix]) -> list[Outcome]:
        outcomes = [Outcome(prefix) for prefix in prefixes]
        for prefix in prefixes:
            for fact in prefix.route.facts:
                ledger_event(fact)
        event_ids = [fact.event_id for prefix in prefixes for fact in prefix.route.facts]
        if not event_ids:
            return outcomes
        acked = {row["event_id"] for row in db.fetch_all("outbox_ack_search", {
            "event_ids": event_ids, "lease_owner": prefixes[0].lease_owner})}
        for outcome in outcomes:
            outcome.acknowledged = sum(1 for fact in outcome.prefix.route.facts if fact.event_id in acked)
        return outcomes
