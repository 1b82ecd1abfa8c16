"""The run-ledger receivers, one module each, registered here by the route kind they serve.

Adding a receiver kind: a ReceiverKind member, a module with a Receiver
subclass, and its line below; routing.route decides when it is chosen.
"""

from __future__ import annotations

from scheduler.kinds import ReceiverKind
from scheduler.outbox.facts import Prefix
from scheduler.outbox.receivers.builtin_ledger import BuiltinLedger
from scheduler.outbox.receivers.interface import Outcome, Receiver
from scheduler.outbox.receivers.ledger_http import LedgerHttp
from scheduler.outbox.receivers.search_lane import SearchLane

# Keyed by each receiver's own `kind`, so a kind is named once, on its class.
RECEIVERS: dict[ReceiverKind, Receiver] = {receiver.kind: receiver
                                           for receiver in (BuiltinLedger(), SearchLane(), LedgerHttp())}


def deliver(prefixes: list[Prefix]) -> list[Outcome]:
    """Each routed prefix to its receiver, each receiver once with all of its prefixes; outcomes in input order.

    A prefix that could not be routed gets its routing error as its outcome, unsent."""
    outcomes: dict[int, Outcome] = {}
    by_kind: dict[ReceiverKind, list[int]] = {}
    for index, prefix in enumerate(prefixes):
        if prefix.route.error is not None:
            outcomes[index] = Outcome(prefix, error=prefix.route.error)
        else:
            by_kind.setdefault(prefix.route.kind, []).append(index)
    for kind, indexes in by_kind.items():
        for index, outcome in zip(indexes, RECEIVERS[kind].deliver([prefixes[i] for i in indexes])):
            outcomes[index] = outcome
    return [outcomes[index] for index in range(len(prefixes))]
