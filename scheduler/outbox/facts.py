"""A claimed fact and its run's causal prefix, as every outbox stage sees them (claim, route, deliver, settle)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.kinds import TERMINAL_FACT_TYPES

if TYPE_CHECKING:
    from scheduler.outbox.routing import Route


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
    leased: bool = True  # False when read under the run's lock for a delivery inside the claim's transaction
    lease_seconds: float = 30.0  # how long the claim leased it for (a slow delivery extends it by as much)
    route: Route | None = None  # decided once, by routing.route

    @property
    def head(self) -> Fact:
        return self.facts[0]

    @property
    def fact_ids(self) -> list[str]:
        return [fact.event_id for fact in self.facts]

    @property
    def has_terminal(self) -> bool:
        return any(fact.event_type in TERMINAL_FACT_TYPES for fact in self.facts)
