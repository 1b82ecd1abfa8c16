"""WAIT-7: an operator sends events and ends waits from a shell, finds waiting runs in the admin and /metrics, and
the wait-timer loop runs as its own supervised command."""

import json

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.urls import reverse

from scheduler.kinds import WaitKind
from scheduler.stack.supervisor import worker_children
from tests import factories
from tests.factories import one, query
from tests.support import current_database_url, run_manage
from tests.waits.conftest import suspended_run

pytestmark = pytest.mark.django_db(transaction=True)


def manage(*args):
    return run_manage(*args, database_url_value=current_database_url())


@pytest.mark.requirement("WAIT-7")
def test_send_event__resumes_the_waiting_run__a_repeat_stores_nothing():
    parked = suspended_run()
    args = ["send_event", parked.run_id, "approved", "--payload", '{"by": "ann"}', "--event-id", "ops-1"]
    sent = manage(*args)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout) == {"eventId": "ops-1", "stored": True, "resumed": True}
    again = manage(*args)
    assert json.loads(again.stdout) == {"eventId": "ops-1", "stored": False, "resumed": False}
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "queued"


@pytest.mark.requirement("WAIT-7")
@pytest.mark.parametrize("args, message", [
    (["--payload", "NaN"], "--payload must be JSON"),
    (["--payload", "{nope"], "--payload must be JSON"),
    (["--payload", '"a\\u0000b"'], "U+0000"),
    (["--event-id", "x" * 201], "eventId"),
])
def test_send_event__bad_input__one_line_non_zero_nothing_written(args, message):
    parked = suspended_run()
    before = factories.table_state()
    result = manage("send_event", parked.run_id, "approved", *args)
    assert result.returncode != 0 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert factories.table_state() == before


def test_send_event__an_unknown_or_finished_run__refused():
    assert "not found" in manage("send_event", "run_nobody", "approved").stderr
    run_id = factories.launch()
    manage("cancel_run", run_id)
    finished = manage("send_event", run_id, "approved")
    assert finished.returncode != 0 and "cancelled" in finished.stderr


@pytest.mark.requirement("WAIT-7")
def test_end_wait__the_run_resumes_timed_out__audited__a_second_time_nothing_changes():
    parked = suspended_run()
    ended = manage("end_wait", parked.run_id, "--reason", "customer called")
    assert ended.returncode == 0 and "resumed" in ended.stdout, ended.stderr
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "queued"
    assert one("SELECT reason FROM operator_actions WHERE action = 'end_wait'") == "customer called"
    again = manage("end_wait", parked.run_id)
    assert again.returncode == 1 and "nothing changed" in again.stderr


@pytest.mark.requirement("WAIT-4", "WAIT-7")
def test_run_wait_timers__once__resumes_the_due_runs__and_is_supervised_with_the_others():
    parked = suspended_run(kind=WaitKind.TIMER, name=None, delay_ms=60_000)
    query("UPDATE runs SET wait_deadline = now() - interval '1 second' WHERE run_id = %s", [parked.run_id])
    ticked = manage("run_wait_timers", "--once")
    assert ticked.returncode == 0, ticked.stderr
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "queued"
    assert "run_wait_timers" in [child.argv[3] for child in worker_children()]


@pytest.mark.requirement("WAIT-7")
def test_metrics__waiting_runs_by_kind_and_the_oldest_wait(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    suspended_run()
    suspended_run(kind=WaitKind.TIMER, name=None, delay_ms=60_000)
    query("UPDATE runs SET updated_at = now() - interval '90 seconds' WHERE suspension_json ->> 'kind' = 'event'")
    query("UPDATE runs SET wait_deadline = now() - interval '1 minute' WHERE suspension_json ->> 'kind' = 'timer'")
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'scheduler_runs_waiting_overdue{kind="timer"} 1.0' in text  # no timer loop resumed it
    assert 'scheduler_runs_waiting{kind="event"} 1.0' in text and 'scheduler_runs_waiting{kind="timer"} 1.0' in text
    oldest = [line for line in text.splitlines() if line.startswith('scheduler_runs_waiting_oldest_seconds{kind="event"}')]
    assert float(oldest[0].split()[-1]) >= 90
    assert "scheduler_runs_active 0.0" in text  # a durably waiting run holds no slot


@pytest.mark.requirement("WAIT-7")
def test_admin__the_waiting_filter_finds_the_run__its_page_tells_the_wait(client):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    parked = suspended_run()
    parked_only = factories.parked_run()
    listed = client.get("/admin/scheduler/run/?waiting_for=event").content.decode()
    assert parked.run_id.replace("_", "_5F") in listed or parked.run_id in listed
    assert parked_only.run_id not in listed
    page = client.get(reverse("admin:scheduler_run_change", args=[quote(parked.run_id)])).content.decode()
    assert "Durable waits and the events sent to the run" in page and "wait approval" in page
    assert "<td>event approved</td>" in page
