"""Stage 2, route (OBX-8): which receiver a claimed prefix goes to, decided once and recorded on the prefix.

The ordinary receiver is the launch's `runtimeApiBaseUrl`, else its
`baseUrl`: the dispatch launch allow-lists both for delivery, and `baseUrl`
is the launch's older name for the same runtime API. A launch naming neither
is delivered to the built-in receiver (OBX-10). A terminal fact of a run whose
array input started goes to the launch's immutable
`arrayInputTerminalProjectionOrigin` instead, and a nonterminal prefix is
never batched into a terminal bound for another receiver: the facts before
the terminal go alone, the rest is released for the next claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from scheduler import messages
from scheduler.kinds import IN_DATABASE_RECEIVERS, TERMINAL_FACT_TYPES, Lane, ReceiverKind
from scheduler.outbox.facts import Fact, Prefix

STAGED_REFUSAL = messages.STAGED_NO_TERMINAL_RECEIVER


class DeliveryError(Exception):
    """A delivery failed; the message is safe to store as last_error."""


@dataclass(frozen=True)
class Route:
    kind: ReceiverKind
    facts: list[Fact]  # what this delivery carries, in causal order
    released: list[Fact] = field(default_factory=list)  # the rest of the prefix, returned for the next claim
    base_url: str | None = None  # the receiver's URL (HTTP only)
    error: DeliveryError | None = None  # a prefix that cannot be routed: the failure policy records this
    terminal_origin: str | None = None  # where this run's terminals go when its array input started
    in_place: bool = False  # delivered inside this database, so inside the claim's transaction (no lease needed)


def is_immutable_origin(origin) -> bool:
    """https, no path, query or fragment, and not a preview alias (a `-git-` deployment alias)."""
    if not isinstance(origin, str):
        return False
    parts = urlsplit(origin)
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        return False
    return not any("-git-" in label for label in parts.hostname.split("."))


def ordinary_receiver(launch: dict | None) -> str | None:
    """The launch's own runtime API: runtimeApiBaseUrl, else baseUrl; None for the built-in receiver."""
    launch = launch or {}
    for key in ("runtimeApiBaseUrl", "baseUrl"):
        if isinstance(launch.get(key), str) and launch[key]:
            return launch[key]
    return None


def distinct_terminal_origin(launch: dict | None, receiver: str | None) -> bool:
    """The launch names a terminal projection origin other than `receiver` (then no prefix batching there)."""
    launch = launch or {}
    origin = launch.get("arrayInputTerminalProjectionOrigin")
    return (launch.get("arrayInputTerminalRetirementSupported") is True and isinstance(origin, str)
            and origin != receiver)


def terminal_origin(prefix: Prefix) -> str | None:
    """The receiver of this run's terminal facts when its array input started; None when it did not."""
    if not prefix.array_input_started:
        return None
    launch = prefix.dispatch_launch or {}
    origin = launch.get("arrayInputTerminalProjectionOrigin")
    if launch.get("arrayInputTerminalRetirementSupported") is not True or not is_immutable_origin(origin):
        raise DeliveryError(STAGED_REFUSAL)
    return origin


def _ledger_target(prefix: Prefix, origin: str | None) -> tuple[str | None, list[Fact]]:
    """(receiver URL or None for the built-in receiver, the facts that go there) of a ledger-lane prefix."""
    ordinary = ordinary_receiver(prefix.dispatch_launch)
    if origin is None:
        return ordinary, prefix.facts
    first_terminal = next(i for i, fact in enumerate(prefix.facts) if fact.event_type in TERMINAL_FACT_TYPES)
    if first_terminal > 0 and ordinary != origin:
        return ordinary, prefix.facts[:first_terminal]
    return origin, prefix.facts


def route(prefix: Prefix) -> Route:
    """Decide the prefix's route and record it on the prefix."""
    if prefix.lane == Lane.SEARCH:
        prefix.route = Route(ReceiverKind.SEARCH, prefix.facts, in_place=True)
        return prefix.route
    try:
        origin = terminal_origin(prefix) if prefix.has_terminal else None
    except DeliveryError as error:
        prefix.route = Route(ReceiverKind.HTTP, prefix.facts, error=error)
        return prefix.route
    base_url, facts = _ledger_target(prefix, origin)
    kind = ReceiverKind.BUILTIN if base_url is None else ReceiverKind.HTTP
    prefix.route = Route(kind, facts, prefix.facts[len(facts):], base_url, terminal_origin=origin,
                         in_place=kind in IN_DATABASE_RECEIVERS)
    return prefix.route
