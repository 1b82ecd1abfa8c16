"""A claimed fact and its run's causal prefix, as the claim, the routing and both receivers see them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scheduler.kinds import TERMINAL_FACT_TYPES


@dataclass
class Fact:
    event_id: str
    run_id: str
    event_type: str
    payload: dict
    created_at: dt.datetime
    attempt_count: int


@dataclass
class Prefix:
    run_id: str
    lane: str
    lease_owner: str
    facts: list[Fact]
    dispatch_launch: dict
    org_id: str | None
    array_input_started: bool = False
    # None while leased for delivery; the count acknowledged when the claim delivered it in its own transaction.
    acknowledged_in_place: int | None = None

    @property
    def head(self) -> Fact:
        return self.facts[0]

    @property
    def fact_ids(self) -> list[str]:
        return [fact.event_id for fact in self.facts]

    @property
    def has_terminal(self) -> bool:
        return any(fact.event_type in TERMINAL_FACT_TYPES for fact in self.facts)
