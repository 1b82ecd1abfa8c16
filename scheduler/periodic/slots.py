"""Cron slots (SCD-3): a schedule's fire times in its IANA zone, as UTC instants.

cronsim computes the next local time with Debian cron's daylight-saving rules: a local time that a change skips
fires once, right after the change. A local time that happens twice (the hour a change repeats) fires once too:
a slot whose wall-clock time equals the one before it is passed over.
"""

from __future__ import annotations

import datetime as dt
import functools
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from scheduler.errors import InvalidInput

ALIASES = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *"}


@functools.lru_cache(maxsize=1024)
def cron_expression(text: str) -> str:
    """Five fields, or an alias; InvalidInput naming `cron` otherwise (kept per text: every fire checks its cron)."""
    expression = ALIASES.get(text.strip().lower(), text.strip())
    if len(expression.split()) != 5:
        raise InvalidInput("cron must have five fields (minute hour day month weekday) or be @hourly, @daily, "
                           "@weekly or @monthly", field="cron")
    try:
        CronSim(expression, dt.datetime(2000, 1, 1))
    except CronSimError as error:
        raise InvalidInput(f"cron is not valid: {error}", field="cron") from None
    return expression


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"timezone {name[:80]!r} is not an IANA time zone", field="timezone") from None


def following(cron: str, timezone: str, after: dt.datetime) -> dt.datetime:
    """The first slot strictly after `after`, as a UTC instant."""
    return next(upcoming(cron, timezone, after))


def upcoming(cron: str, timezone: str, after: dt.datetime):
    """Every slot strictly after `after`, in order, as UTC instants (an endless iterator)."""
    tz = zone(timezone)
    local_after = after.astimezone(tz)
    # cronsim yields the slots strictly after its (whole-minute) start.
    start = local_after.replace(second=0, microsecond=0)
    previous_wall = local_after.replace(tzinfo=None) if local_after.second == 0 and not local_after.microsecond \
        else None
    for slot in CronSim(cron_expression(cron), start):
        wall = slot.replace(tzinfo=None)
        if wall == previous_wall:
            continue  # the repeated hour of a change back: this local time already fired
        previous_wall = wall
        yield slot.astimezone(dt.UTC)
