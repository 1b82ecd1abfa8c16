"""SCD-6, SCD-7 in the admin and /metrics: a schedule's page shows its next five fire times and recent fires; a
skipped slot is fired again by an action (audited); the schedule gauges."""

import datetime as dt

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.urls import reverse

from scheduler.periodic import definitions, firing
from tests.factories import one, query

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def skipped_schedule():
    row = definitions.create(definitions.ScheduleSpec("org-s", "hourly", "0 * * * *", "UTC",
                                                      {"playName": "tests.plays:fail"}, catch_up="skip"))
    due = dt.datetime(2026, 1, 1, 5, tzinfo=dt.UTC)
    query("UPDATE schedules SET next_fire_at = %s", [due])
    firing.run_once(now=due + dt.timedelta(hours=2))
    return row["schedule_id"]


def test_a_schedules_page__next_five_fire_times_and_recent_fires(admin_client):
    schedule_id = skipped_schedule()
    page = admin_client.get(reverse("admin:scheduler_schedule_change", args=[quote(schedule_id)])).content.decode()
    assert "next five fire times" in page.lower() and page.count(":00, ") >= 4
    assert "skipped_catch_up" in page


def test_the_repair_action_fires_a_skipped_slot_once__audited(admin_client):
    schedule_id = skipped_schedule()
    changelist = reverse("admin:scheduler_schedulefirerow_changelist")
    assert admin_client.get(changelist).status_code == 200
    fire = one("SELECT slot_at FROM schedule_fires WHERE slot_at = '2026-01-01T06:00Z'")
    from scheduler.models import ScheduleFireRow

    pk = ScheduleFireRow.objects.get(schedule_id=schedule_id, slot_at=fire).pk
    admin_client.post(changelist, {"action": "repair_fires", "_selected_action": [pk]})
    assert one("SELECT outcome FROM schedule_fires WHERE slot_at = '2026-01-01T06:00Z'") == "launched"
    assert one("SELECT actor, action FROM operator_actions") == ("admin:ops", "repair_schedule_fire")


def test_metrics__schedules_due_and_fires_per_outcome(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    skipped_schedule()
    query("UPDATE schedules SET next_fire_at = now() - interval '90 seconds'")
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert "scheduler_schedules_due 1.0" in text
    assert 'scheduler_schedule_fires_last_hour{outcome="skipped_catch_up"} 2.0' in text  # 05:00, 06:00
    assert 'scheduler_schedule_fires_last_hour{outcome="launched"} 1.0' in text  # 07:00, on time
    oldest = float(text.split("\nscheduler_schedules_oldest_due_seconds ")[1].split()[0])
    assert oldest >= 90
