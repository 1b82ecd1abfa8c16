"""Cron slots (SCD-3): a schedule's fire times in its IANA zone, as UTC instants.

cronsim walks the cron's wall-clock times (naive, so it never applies a zone rule of its own); each is then
placed on the zone's timeline with Debian cron's daylight-saving rules, for every cron, however many of its slots
fall in the changed hour:
- a wall time a change skips fires right after the change: every skipped slot of that gap at the change's
  instant, one microsecond apart, so each keeps its own fire record (`schedule_fires` is keyed by the instant);
- a wall time a change repeats fires once, at its first occurrence.
"""

from __future__ import annotations

import datetime as dt
import functools
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

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
        next(CronSim(expression, dt.datetime(2000, 1, 1)))
    except CronSimError as error:
        raise InvalidInput(f"cron is not valid: {error}", field="cron") from None
    except StopIteration:  # cronsim found no date it matches (`0 0 */40 * 1#5`)
        raise InvalidInput("cron never fires (no date matches it)", field="cron") from None
    return expression


# Files of the zone database that are not IANA zones: the host's own zone, a rule template, the "no zone" zone.
NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@functools.lru_cache(maxsize=1)
def iana_zones() -> frozenset[str]:
    return frozenset(name for name in available_timezones()
                     if name not in NOT_ZONES and not name.startswith(("posix/", "right/")))


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name` (SCD-7: `localtime`, a file path or the host's zone is refused, naming `timezone`)."""
    if name not in iana_zones():
        raise InvalidInput(f"timezone {name[:80]!r} is not an IANA time zone", field="timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"timezone {name[:80]!r} is not an IANA time zone", field="timezone") from None


def following(cron: str, timezone: str, after: dt.datetime) -> dt.datetime:
    """The first slot strictly after `after`, as a UTC instant; InvalidInput naming `cron` if it never fires."""
    for slot in upcoming(cron, timezone, after):
        return slot
    raise InvalidInput("cron never fires (no date matches it)", field="cron")


# Wall-clock times are walked from this far before `after`: a slot in a repeated hour may have a wall time before
# `after`'s and an instant after it (no zone shifts its clocks by more than this at once).
_LOOKBACK = dt.timedelta(hours=3)


def upcoming(cron: str, timezone: str, after: dt.datetime):
    """Every slot strictly after `after`, in order, as UTC instants (endless, unless the cron stops matching)."""
    tz = zone(timezone)
    start = (after.astimezone(tz).replace(tzinfo=None) - _LOOKBACK).replace(second=0, microsecond=0)
    gap_instant, gap_index = None, 0
    walk = CronSim(cron_expression(cron), start)
    while True:
        try:
            wall = next(walk)
        except StopIteration:  # cronsim gives up on a cron no date matches
            return
        instant = _existing(wall, tz)
        if instant is None:
            change = _after_gap(wall, tz)
            gap_index = gap_index + 1 if change == gap_instant else 0
            gap_instant = change
            instant = change + dt.timedelta(microseconds=gap_index)
        if instant > after:
            yield instant


def _existing(wall: dt.datetime, tz: ZoneInfo) -> dt.datetime | None:
    """The UTC instant of a wall time that exists in `tz` (its first occurrence when repeated), or None in a gap."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(dt.UTC)
    if first.astimezone(tz).replace(tzinfo=None) != wall:
        return None
    return first


def _after_gap(wall: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """The instant a gap ends: that of the first wall-clock minute after `wall` that exists."""
    minute = wall.replace(second=0, microsecond=0)
    for _ in range(24 * 60):
        minute += dt.timedelta(minutes=1)
        instant = _existing(minute, tz)
        if instant is not None:
            return instant
    raise InvalidInput(f"timezone {tz.key!r} skips more than a day", field="timezone")
