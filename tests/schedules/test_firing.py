"""SCD-1, SCD-2, SCD-4..6: the fire statement's outcomes, catch-up, overlap, pause and repair (the loop's own
functions, with `now` passed in instead of waiting)."""

import datetime as dt
import json

import pytest

from scheduler.errors import Conflict, InvalidInput
from scheduler.operations import repairs
from scheduler.runs import admission
from scheduler.periodic import definitions, firing
from tests.factories import one, query

pytestmark = pytest.mark.django_db
UTC = dt.UTC
TEMPLATE = {"playName": "tests.plays:fail", "input": {"n": 1}}


def schedule(cron="0 * * * *", *, template=None, overlap="allow", catch_up="latest", due=None, **extra):
    """A schedule whose next slot is `due` (a slot of its cron)."""
    row = definitions.create(definitions.ScheduleSpec("org-s", extra.pop("name", "hourly"), cron, "UTC",
                                                      template or TEMPLATE, overlap, catch_up, **extra))
    if due is not None:
        query("UPDATE schedules SET next_fire_at = %s WHERE schedule_id = %s", [due, row["schedule_id"]])
    return row["schedule_id"]


def fires(schedule_id):
    return [(slot.strftime("%H:%M"), outcome) for slot, outcome in
            query("SELECT slot_at, outcome FROM schedule_fires WHERE schedule_id = %s ORDER BY slot_at", [schedule_id])]


def hour(h, minute=0):
    return dt.datetime(2026, 1, 1, h, minute, tzinfo=UTC)


@pytest.mark.requirement("SCD-2")
def test_scd2__a_due_slot_launches_its_run_with_the_slots_key__and_the_schedule_moves_on():
    sid = schedule(due=hour(5))
    fired = firing.fire_next(now=hour(5, 0) + dt.timedelta(seconds=3))
    assert fired.outcome == "launched"
    assert one("SELECT idempotency_key, org_id, play_name FROM runs WHERE run_id = %s", [fired.run_id]) == (
        f"schedule:{sid}:2026-01-01T05:00:00Z", "org-s", "tests.plays:fail")
    assert one("SELECT next_fire_at FROM schedules") == hour(6)
    assert firing.fire_next(now=hour(5, 30)) is None  # the next slot is not due


@pytest.mark.requirement("SCD-4")
def test_scd4__after_a_three_hour_outage__latest_fires_the_most_recent_slot_once():
    sid = schedule(due=hour(5), catch_up="latest")
    firing.run_once(now=hour(8, 20))
    assert fires(sid) == [("05:00", "skipped_catch_up"), ("06:00", "skipped_catch_up"),
                          ("07:00", "skipped_catch_up"), ("08:00", "launched")]
    assert one("SELECT count(*) FROM runs") == 1


@pytest.mark.requirement("SCD-4")
def test_scd4__skip_fires_none_of_the_missed_slots__the_next_future_one_fires():
    sid = schedule(due=hour(5), catch_up="skip")
    firing.run_once(now=hour(8, 20))
    assert [outcome for _, outcome in fires(sid)] == ["skipped_catch_up"] * 4
    assert one("SELECT count(*) FROM runs") == 0 and one("SELECT next_fire_at FROM schedules") == hour(9)
    firing.run_once(now=hour(9, 0) + dt.timedelta(seconds=5))  # on time: fires
    assert fires(sid)[-1] == ("09:00", "launched")


@pytest.mark.requirement("SCD-4")
def test_scd4__all_fires_every_missed_slot_in_order__at_most_100():
    sid = schedule(due=hour(5), catch_up="all")
    firing.run_once(now=hour(8, 20))
    assert fires(sid) == [(f"0{h}:00", "launched") for h in (5, 6, 7, 8)]
    minutely = schedule("* * * * *", catch_up="all", name="minutely", due=hour(10))
    firing.run_once(limit=500, now=hour(12, 0))  # 121 slots due
    outcomes = [outcome for _, outcome in fires(minutely)]
    assert outcomes == ["skipped_catch_up"] * 21 + ["launched"] * 100


@pytest.mark.requirement("SCD-5")
def test_scd5__overlap_skip__a_slot_whose_previous_run_is_open_is_skipped():
    sid = schedule(due=hour(5), overlap="skip")
    first = firing.fire_next(now=hour(5, 0))
    second = firing.fire_next(now=hour(6, 0))
    assert second.outcome == "skipped_overlap" and first.run_id in second.error
    query("UPDATE runs SET status = 'completed', finished_at = now() WHERE run_id = %s", [first.run_id])
    assert firing.fire_next(now=hour(7, 0)).outcome == "launched"
    assert [outcome for _, outcome in fires(sid)] == ["launched", "skipped_overlap", "launched"]


@pytest.mark.requirement("SCD-5")
def test_scd5__overlap_cancel_previous__cancels_the_open_run_and_launches():
    schedule(due=hour(5), overlap="cancel_previous")
    first = firing.fire_next(now=hour(5, 0))
    second = firing.fire_next(now=hour(6, 0))
    assert second.outcome == "launched"
    assert one("SELECT status FROM runs WHERE run_id = %s", [first.run_id]) == "cancelled"  # a queued run: at once


@pytest.mark.requirement("SCD-2")
def test_scd2__a_closed_release_is_recorded__and_the_schedule_goes_on():
    admission.set_admission("rel-9", False, 3, None)
    sid = schedule(due=hour(5), template={**TEMPLATE, "launch": {"absurdReleaseId": "rel-9"}})
    assert firing.fire_next(now=hour(5, 0)).outcome == "skipped_closed_release"
    assert one("SELECT next_fire_at FROM schedules WHERE schedule_id = %s", [sid]) == hour(6)


@pytest.mark.requirement("SCD-2")
def test_scd2__a_template_the_launch_refuses__recorded_refused_with_the_error__the_schedule_goes_on():
    sid = schedule(due=hour(5))
    query("UPDATE schedules SET launch_template = %s", [json.dumps({**TEMPLATE, "maxAttempts": 0})])
    fired = firing.fire_next(now=hour(5, 0))
    assert fired.outcome == "refused" and "maxAttempts" in fired.error
    assert one("SELECT error FROM schedule_fires WHERE schedule_id = %s", [sid]) == fired.error
    assert one("SELECT next_fire_at FROM schedules") == hour(6)


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("field,spec", [
    ("cron", {"cron": "every hour"}), ("timezone", {"timezone": "Europe/Atlantis"}),
    ("launchTemplate.playName", {"launch_template": {"input": {}}}), ("overlap", {"overlap": "queue"}),
    ("catchUp", {"catch_up": "some"}), ("launchTemplate.idempotencyKey", {"launch_template": {**TEMPLATE, "idempotencyKey": "x"}}),
    ("launchTemplate", {"launch_template": {"playName": "m:f", "input": "\u0000"}}), ("name", {"name": ""})])
def test_scd7__a_bad_schedule__refused_naming_the_field__nothing_written(field, spec):
    base = dict(org_id="org-s", name="n", cron="0 * * * *", timezone="UTC", launch_template=TEMPLATE)
    before = one("SELECT count(*) FROM schedules")
    with pytest.raises(InvalidInput) as refused:
        definitions.create(definitions.ScheduleSpec(**{**base, **spec}))
    assert refused.value.field.startswith(field), (refused.value.field, refused.value.message)
    assert one("SELECT count(*) FROM schedules") == before


@pytest.mark.requirement("SCD-1")
def test_scd1__a_name_is_unique_per_org():
    schedule(name="nightly")
    with pytest.raises(Conflict):
        schedule(name="nightly")


@pytest.mark.requirement("SCD-7")
def test_scd7__pause_holds_the_slots__resume_goes_on_from_the_next_slot_after_now():
    sid = schedule(due=hour(5))
    assert definitions.set_paused(sid, True)
    assert firing.fire_next(now=hour(9)) is None
    assert definitions.set_paused(sid, False, now=hour(9, 30))
    assert one("SELECT next_fire_at FROM schedules") == hour(10)
    assert fires(sid) == []


@pytest.mark.requirement("SCD-6")
def test_scd6__repair__a_skipped_slot_fires_once__a_second_repair_and_a_launched_slot_do_nothing():
    sid = schedule(due=hour(5), catch_up="skip")
    firing.run_once(now=hour(8, 20))
    repaired = repairs.repair_schedule_fire(sid, hour(6), "ops", "missed the 06:00 report")
    assert repaired.changed and "launched run" in repaired.outcome
    again = repairs.repair_schedule_fire(sid, hour(6), "ops")
    assert not again.changed and "already launched" in again.outcome
    assert one("SELECT count(*) FROM runs") == 1
    assert dict(fires(sid))["06:00"] == "launched"
    assert not repairs.repair_schedule_fire(sid, hour(6, 30), "ops").changed  # not a slot of the schedule
    assert [row[0] for row in query("SELECT changed FROM operator_actions ORDER BY id")] == [True, False, False]


@pytest.mark.requirement("SCD-2")
def test_scd2__an_idle_tick_says_when_the_next_slot_falls_due__so_the_loop_sleeps_until_then():
    from scheduler.loop import Loop

    schedule("0 * * * *")
    tick = firing.run_once()
    upcoming = one("SELECT next_fire_at FROM schedules")
    assert abs(tick.due_in - (upcoming - dt.datetime.now(UTC)).total_seconds()) < 5 and not tick.again
    waits = []

    class Recorded:
        def wait(self, seconds):
            waits.append(seconds)
            return False

    idle = Loop("schedules", lambda: tick, interval=30.0)
    idle.wake = Recorded()
    idle._idle_wait(0.25)
    assert waits == [0.25]  # the slot, not the 30 s interval


@pytest.mark.requirement("SCD-7")
def test_scd7__a_change_that_unpauses__resumes_from_the_next_slot_after_now_as_resume_does():
    sid = schedule(due=hour(5))
    definitions.set_paused(sid, True)
    definitions.update(sid, {"paused": False}, now=hour(9, 30))
    assert one("SELECT next_fire_at FROM schedules") == hour(10)
    definitions.update(sid, {"overlap": "skip"}, now=hour(11, 30))  # no cron, zone or pause change: the slot stays
    assert one("SELECT next_fire_at FROM schedules") == hour(10)


@pytest.mark.requirement("SCD-6")
@pytest.mark.django_db(transaction=True)
def test_scd6__a_repair_racing_the_loop_says_it_changed_nothing(monkeypatch):
    """The loop records the slot launched between the repair's lock and its record (no row to lock yet): the repair
    reports what happened, not "launched"; one run, found by the slot's key."""
    from tests.support import connect
    from django.db import connection

    sid = schedule(due=hour(6), catch_up="latest")
    launch = firing.launch

    def the_loop_fires_first(schedule_row, slot_at):
        fired = launch(schedule_row, slot_at)
        with connect(connection.settings_dict["NAME"], autocommit=True) as other:
            other.execute("INSERT INTO runtime_scheduler.schedule_fires (schedule_id, slot_at, run_id, outcome, fired_at) "
                          "VALUES (%s, %s, 'run-of-the-loop', 'launched', now())", [sid, slot_at])
        return fired

    monkeypatch.setattr(firing, "launch", the_loop_fires_first)
    repaired = repairs.repair_schedule_fire(sid, hour(6), "ops")
    assert not repaired.changed
    assert "launched the slot meanwhile" in repaired.outcome


@pytest.mark.requirement("SCD-6")
@pytest.mark.django_db(transaction=True)
def test_scd6__the_repair_command_end_to_end():
    """`manage.py repair_schedule_fire` in its own process: a skipped slot launches once (exit 0), a second repair
    says the slot launched already (exit 1), a time that is no slot is refused; each audited."""
    from tests.support import current_database_url, run_manage

    sid = schedule(due=hour(5), catch_up="skip")
    firing.run_once(now=hour(8, 20))
    assert dict(fires(sid))["06:00"] == "skipped_catch_up"
    url = current_database_url()
    first = run_manage("repair_schedule_fire", sid, "2026-01-01T06:00:00Z", "--reason", "missed report",
                       database_url_value=url)
    assert first.returncode == 0, first.stderr
    assert "launched run" in first.stdout
    again = run_manage("repair_schedule_fire", sid, "2026-01-01T06:00:00+00:00", database_url_value=url)
    assert again.returncode == 1 and "already launched" in again.stderr
    not_a_slot = run_manage("repair_schedule_fire", sid, "2026-01-01T06:30:00Z", database_url_value=url)
    assert not_a_slot.returncode == 1 and "not a slot" in not_a_slot.stderr
    naive = run_manage("repair_schedule_fire", sid, "2026-01-01T06:00:00", database_url_value=url)
    assert naive.returncode != 0 and "time zone" in naive.stderr
    assert dict(fires(sid))["06:00"] == "launched"
    assert [row[0] for row in query("SELECT changed FROM operator_actions ORDER BY id")] == [True, False, False]
