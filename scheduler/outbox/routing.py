"""Where a claimed prefix goes (OBX-8): the launch's receiver, the terminal projection origin, or this database.

The ordinary receiver is the launch's `runtimeApiBaseUrl`, else its
`baseUrl`: the dispatch launch allow-lists both for delivery, and `baseUrl`
is the launch's older name for the same runtime API. A launch naming neither
is delivered to the built-in receiver (OBX-10). A terminal fact of a run whose
array input started goes to the launch's immutable
`arrayInputTerminalProjectionOrigin` instead, and a nonterminal prefix is
never batched into a terminal bound for another receiver.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from scheduler import messages
from scheduler.kinds import TERMINAL_FACT_TYPES, Lane
from scheduler.outbox.facts import Fact, Prefix

STAGED_REFUSAL = messages.STAGED_NO_TERMINAL_RECEIVER


class DeliveryError(Exception):
    """A delivery failed; the message is safe to store as last_error."""


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


def goes_over_http(prefix: Prefix) -> bool:
    """Whether delivering this prefix may call an external receiver."""
    return prefix.lane == Lane.LEDGER and bool(ordinary_receiver(prefix.dispatch_launch) or prefix.array_input_started)


def plan_routes(prefix: Prefix) -> list[tuple[str | None, list[Fact]]]:
    """The receiver of each part of the prefix, in causal order; None is the built-in receiver.

    Returns one route when the whole prefix shares a receiver; else the facts
    before the first terminal (the rest is released for the next claim, which
    then starts at the terminal).
    """
    ordinary = ordinary_receiver(prefix.dispatch_launch)
    if not prefix.has_terminal:
        return [(ordinary, prefix.facts)]
    origin = terminal_origin(prefix)
    if origin is None:
        return [(ordinary, prefix.facts)]
    first_terminal = next(i for i, fact in enumerate(prefix.facts) if fact.event_type in TERMINAL_FACT_TYPES)
    if first_terminal > 0 and ordinary != origin:
        return [(ordinary, prefix.facts[:first_terminal])]
    return [(origin, prefix.facts)]


def may_stay_local(lane: str, launch: dict | None) -> bool:
    """Whether a run's prefix may be bound for this database: the search lane, or a launch naming no receiver
    (only a staged terminal can then still go out, which stays_local tells once the prefix is read)."""
    return lane == Lane.SEARCH or ordinary_receiver(launch) is None


def stays_local(prefix: Prefix) -> bool:
    """Whether the whole prefix is delivered inside this database (the search lane or the built-in receiver)."""
    if prefix.lane == Lane.SEARCH:
        return True
    try:
        routes = plan_routes(prefix)
    except DeliveryError:
        return False  # leased, so the failure policy records the refusal on the head
    return routes == [(None, prefix.facts)]
