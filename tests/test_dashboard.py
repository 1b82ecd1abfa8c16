"""The admin dashboard: right figures for seeded data, each a link to the list that explains it, each statement
bounded by an index however much history the tables keep."""

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection

from scheduler import db
from scheduler.admin import dashboard
from scheduler.runs import settlement
from tests import factories
from tests.cleanup.factories import v2
from tests.factories import query

from tests.support import prepared_text

pytestmark = pytest.mark.django_db
DASHBOARD_STATEMENTS = ("dashboard_runs", "dashboard_failures", "dashboard_backlogs", "runs_list_stuck", "waits_metrics")


def _seed():
    factories.launch()  # queued
    factories.parked_run()  # waiting
    stuck = factories.parked_run(heartbeat_timeout_ms=1)
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 minute' WHERE run_id = %s", [stuck.run_id])
    failed = factories.parked_run(max_attempts=1)
    settlement.settle_attempt(failed.run_id, 1, failed.lease_token, factories.failed_result("play_failed"))
    v2("sb-blocked", provider="local", run_id="run-x", status="blocked")
    return stuck, failed


def _by_label(section):
    return {figure.label: figure for figure in section}


def test_figures__for_seeded_data():
    stuck, failed = _seed()
    figures = dashboard.figures()
    runs = _by_label(figures["Runs"])
    assert (runs["queued"].value, runs["waiting on a runner"].value) == (1, 2)
    assert runs["stuck runners (heartbeat past its timeout)"].value == 1
    assert [(figure.label, figure.value) for figure in figures["Failed in the last 24 hours"]] == [("play_failed", 1)]
    assert _by_label(figures["Sandbox cleanup and billing"])["cleanup blocked"].value == 1


def test_each_figure_links_to_the_list_that_explains_it(client):
    stuck, failed = _seed()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    index = client.get("/admin/").content.decode()
    assert 'id="scheduler-dashboard"' in index
    figures = dashboard.figures()
    stuck_list = client.get(_by_label(figures["Runs"])["stuck runners (heartbeat past its timeout)"].link)
    assert stuck_list.status_code == 200 and stuck.run_id in stuck_list.content.decode()
    failures = client.get(figures["Failed in the last 24 hours"][0].link).content.decode()
    assert failed.run_id in failures and stuck.run_id not in failures
    blocked = client.get(_by_label(figures["Sandbox cleanup and billing"])["cleanup blocked"].link).content.decode()
    assert "sb-blocked" in blocked


@pytest.mark.requirement("WAIT-7")
def test_figures__runs_waiting_durably_apart_from_those_waiting_on_a_runner(client):
    from tests.waits.conftest import suspended_run

    factories.parked_run()
    waiting = suspended_run()
    runs = _by_label(dashboard.figures()["Runs"])
    assert (runs["waiting on a runner"].value, runs["waiting durably for an event"].value,
            runs["waiting durably for a time"].value) == (1, 1, 0)
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    listed = client.get(runs["waiting durably for an event"].link).content.decode()
    assert waiting.run_id in listed or waiting.run_id.replace("_", "_5F") in listed


@pytest.fixture
def long_history():
    """100,000 finished runs with their facts and tombstones: what a dashboard must not scan."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO runs (run_id, play_name, status, launch_json, max_attempts, created_at, finished_at)
            SELECT 'old-' || i, 'p', 'completed', '{}', 1, now() - interval '30 days', now() - interval '30 days'
            FROM generate_series(1, 100000) AS i;
            INSERT INTO outbox (event_id, run_id, event_type, payload_json, delivered_at)
            SELECT 'old-' || i || ':run.completed', 'old-' || i, 'run.completed', '{}', now() - interval '30 days'
            FROM generate_series(1, 100000) AS i;
            INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, status, deleted_at)
            SELECT 'local', 'old-' || i, 'old-' || i, 1, 'production', 'deleted', now() - interval '30 days'
            FROM generate_series(1, 100000) AS i;
            ANALYZE runs; ANALYZE outbox; ANALYZE sandbox_cleanup_jobs_v2;
        """)


@pytest.mark.parametrize("name", DASHBOARD_STATEMENTS)
def test_dashboard_statements__never_scan_the_history(long_history, name):
    sql, names = prepared_text(name)
    params = {"default_timeout_ms": 60_000, "kind": "runner", "limit": 1000}
    with psycopg.RawCursor(connection.connection) as cursor:
        cursor.execute("EXPLAIN " + sql, [params[key] for key in names])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    scans = [line.strip() for line in plan.splitlines()
             if any(f"Seq Scan on {table} " in line for table in ("runs", "outbox", "sandbox_cleanup_jobs_v2"))]
    assert scans == [], plan


def test_a_malformed_suspension__reads_as_its_default_timeout__never_breaks_the_dashboard():
    """An older writer's heartbeatTimeoutMs "soon" must not turn every dashboard view into an error."""
    parked = factories.parked_run()
    query("UPDATE runs SET suspension_json = jsonb_set(suspension_json, '{heartbeatTimeoutMs}', '\"soon\"') "
          "WHERE run_id = %s", [parked.run_id])
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 day' WHERE run_id = %s", [parked.run_id])
    assert _by_label(dashboard.figures()["Runs"])["stuck runners (heartbeat past its timeout)"].value == 1
