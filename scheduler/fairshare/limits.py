"""Org limits (FSH-1, FSH-6, FSH-8, FSH-10, FSH-11): read one org's limits and weight with what it holds, change them audited.

The API, the `org_limits` command and the admin all change limits through `change`, one statement that writes
the limits and their `operator_actions` row together; the next claim reads them (never a claim in flight).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scheduler import db
from scheduler.errors import InvalidInput
from scheduler.validation import MAX_INT32

KEEP = object()  # a field a change leaves as it is
MIN_WEIGHT, MAX_WEIGHT = 1, 1000  # FSH-11


@dataclass(frozen=True)
class OrgLimits:
    org_id: str
    max_active: int | None
    max_starts_per_minute: int | None
    paused: bool
    weight: int
    reason: str | None
    updated_at: dt.datetime | None
    updated_by: str | None
    active: int
    queued: int


@dataclass(frozen=True)
class LimitsChange:
    """What to set: a value, None to clear, or KEEP. `paused` is True, False or None (keep)."""

    max_active: object = KEEP
    max_starts_per_minute: object = KEEP
    paused: bool | None = None
    reason: object = KEEP
    weight: int | None = None  # FSH-11: 1..1000; None keeps it

    def __post_init__(self):
        if self.weight is not None and (isinstance(self.weight, bool) or not isinstance(self.weight, int)
                                        or not MIN_WEIGHT <= self.weight <= MAX_WEIGHT):
            raise InvalidInput(f"weight must be an integer between {MIN_WEIGHT} and {MAX_WEIGHT}", field="weight")
        for name in ("max_active", "max_starts_per_minute"):
            value = getattr(self, name)
            if value is KEEP or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT32:
                raise InvalidInput(f"{name} must be an integer between 0 and {MAX_INT32} or null", field=name)


def read(org_id: str) -> OrgLimits:
    return OrgLimits(**db.fetch_one("org_limits_read", {"org_id": org_id}))


def change(org_id: str, wanted: LimitsChange, *, actor: str, action: str = "org_limits_set") -> tuple[OrgLimits, bool]:
    """Apply `wanted` to the org's limits and audit it; returns the limits now in force and whether they changed."""
    def value(field):
        return None if field is KEEP else field

    changed = db.fetch_value("org_limits_set", {
        "org_id": org_id, "actor": actor, "action": action,
        "max_active": value(wanted.max_active), "set_max_active": wanted.max_active is not KEEP,
        "max_starts_per_minute": value(wanted.max_starts_per_minute),
        "set_max_starts": wanted.max_starts_per_minute is not KEEP,
        "paused": wanted.paused, "reason": value(wanted.reason), "set_reason": wanted.reason is not KEEP,
        "weight": wanted.weight,
    })
    return read(org_id), bool(changed)


def held(limit: int = 50) -> list[dict]:
    """Paused orgs and orgs with a limit of their own, with their active and queued runs (the dashboard's list)."""
    return db.fetch_all("org_limits_list_held", {"limit": limit})
