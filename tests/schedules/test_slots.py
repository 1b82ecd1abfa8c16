"""SCD-3: slots in the schedule's IANA zone, with daylight-saving days firing each local time once."""

import datetime as dt
import itertools

import pytest

from scheduler.errors import InvalidInput
from scheduler.periodic import slots

UTC = dt.UTC


def first(cron, timezone, after, count):
    return [slot.strftime("%Y-%m-%dT%H:%MZ") for slot in itertools.islice(slots.upcoming(cron, timezone, after), count)]


def test_a_local_time_the_spring_change_skips__fires_once_right_after_the_change():
    # Europe/Berlin, 2027-03-28: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day.
    assert first("30 2 * * *", "Europe/Berlin", dt.datetime(2027, 3, 27, tzinfo=UTC), 3) == [
        "2027-03-27T01:30Z", "2027-03-28T01:00Z", "2027-03-29T00:30Z"]


def test_a_local_time_the_autumn_change_repeats__fires_once():
    # 2027-10-31: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice; the daily slot fires once.
    assert first("30 2 * * *", "Europe/Berlin", dt.datetime(2027, 10, 30, tzinfo=UTC), 3) == [
        "2027-10-30T00:30Z", "2027-10-31T00:30Z", "2027-11-01T01:30Z"]


def test_an_hourly_schedule_over_the_repeated_hour__each_local_time_once():
    assert first("30 * * * *", "Europe/Berlin", dt.datetime(2027, 10, 30, 23, 0, tzinfo=UTC), 3) == [
        "2027-10-30T23:30Z", "2027-10-31T00:30Z", "2027-10-31T02:30Z"]  # 02:30 CEST, then 03:30 CET


def test_slots_are_strictly_after__and_aliases_read_as_their_five_fields():
    at = dt.datetime(2027, 1, 1, 5, 0, tzinfo=UTC)
    assert first("0 * * * *", "UTC", at, 1) == ["2027-01-01T06:00Z"]
    assert first("@hourly", "UTC", at, 1) == ["2027-01-01T06:00Z"]
    assert first("@daily", "UTC", at, 1) == ["2027-01-02T00:00Z"]
    assert first("@monthly", "UTC", at, 1) == ["2027-02-01T00:00Z"]


@pytest.mark.parametrize("cron", ["61 * * * *", "* * * *", "@yearly", "", "* * * * * *"])
def test_a_bad_cron__names_the_field(cron):
    with pytest.raises(InvalidInput) as refused:
        slots.cron_expression(cron)
    assert refused.value.field == "cron"


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../etc/passwd", "", "UTC\x00"])
def test_a_bad_timezone__names_the_field(zone):
    with pytest.raises(InvalidInput) as refused:
        slots.zone(zone)
    assert refused.value.field == "timezone"


def _micro(cron, timezone, after, count):
    return [slot.isoformat().replace("+00:00", "Z")
            for slot in itertools.islice(slots.upcoming(cron, timezone, after), count)]


@pytest.mark.requirement("SCD-3")
def test_every_slot_of_the_skipped_hour_fires_once_right_after_the_spring_change():
    """SCD-3 for a cron with several slots in the changed hour: 02:00, 02:20 and 02:40 do not exist on 2027-03-28 in
    Berlin; each fires once at the change (03:00 CEST), a microsecond apart so each has its own fire record."""
    assert _micro("*/20 2 * * *", "Europe/Berlin", dt.datetime(2027, 3, 27, 12, tzinfo=UTC), 4) == [
        "2027-03-28T01:00:00Z", "2027-03-28T01:00:00.000001Z", "2027-03-28T01:00:00.000002Z",
        "2027-03-29T00:00:00Z"]


def test_every_slot_of_the_repeated_hour_fires_once_in_the_autumn():
    # 02:00-02:59 happens twice on 2027-10-31 (CEST, then CET): each slot fires at its first occurrence only.
    assert first("*/20 2 * * *", "Europe/Berlin", dt.datetime(2027, 10, 30, 12, tzinfo=UTC), 4) == [
        "2027-10-31T00:00Z", "2027-10-31T00:20Z", "2027-10-31T00:40Z", "2027-11-01T01:00Z"]
    assert first("15,45 * * * *", "Europe/Berlin", dt.datetime(2027, 10, 30, 23, 30, tzinfo=UTC), 5) == [
        "2027-10-30T23:45Z", "2027-10-31T00:15Z", "2027-10-31T00:45Z", "2027-10-31T02:15Z", "2027-10-31T02:45Z"]


def test_a_slot_after_a_point_inside_the_repeated_hour_is_not_fired_again():
    # After 02:30 CET (the second pass, 01:30Z), the slots of the first pass (02:40 CEST = 00:40Z) are in the past.
    assert first("*/20 2,3 * * *", "Europe/Berlin", dt.datetime(2027, 10, 31, 1, 30, tzinfo=UTC), 2) == [
        "2027-10-31T02:00Z", "2027-10-31T02:20Z"]


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("cron", ["0 0 */40 * 1#5", "0 0 */31 * 5L", "0 0 30 2 *"])
def test_a_cron_that_never_fires__names_the_field(cron):
    """SCD-7: refused at the edge (cronsim gives up on it), never a StopIteration inside a request."""
    with pytest.raises(InvalidInput) as refused:
        slots.cron_expression(cron)
    assert refused.value.field == "cron"


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("zone", ["localtime", "posixrules", "Factory", "posix/Europe/Berlin", "right/UTC"])
def test_only_iana_zones(zone):
    """SCD-7: files of the zone database that are not IANA zones are refused."""
    with pytest.raises(InvalidInput) as refused:
        slots.zone(zone)
    assert refused.value.field == "timezone"
