"""GET /healthz: 200 on a ready database, 503 naming the cause otherwise."""

import pytest
from django.db import connection

from tests import factories
from tests.support import current_database_url, run_manage

pytestmark = pytest.mark.django_db


def test_healthz__ready_database__200(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "schema": "runtime_scheduler", "schemaVersion": 64}


def test_healthz__v64_column_missing__503_names_it(client):
    # DDL is transactional: the test's transaction rolls the drop back.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE runs DROP COLUMN array_input_started")
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["reason"] == "schema not ready"
    assert any("runs.array_input_started" in problem for problem in body["problems"])


def test_metrics__gauges_behind_the_internal_token(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    from tests.outbox.factories import backlog_run

    backlog_run("run-m", facts=3)
    assert client.get("/metrics").status_code == 401
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert "scheduler_outbox_undelivered 3.0" in text
    assert "# TYPE scheduler_outbox_oldest_undelivered_seconds gauge" in text


@pytest.mark.django_db(transaction=True)  # a loop tick recycles the connection, as workers do
def test_metrics__histograms_an_operator_alerts_on(client, settings):
    from scheduler.loop import Loop

    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    parked = factories.parked_run()
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    Loop("probe", lambda: {"claimed": 1}, interval=0, once=True).run()
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'scheduler_worker_tick_seconds_count{worker="probe"}' in text
    assert "scheduler_settle_batch_size_count" in text
    assert "scheduler_park_batch_size_count" in text  # factories.parked_run parks through park_all
    assert "scheduler_outbox_undelivered " in text


@pytest.mark.django_db(transaction=True)
def test_metrics__aggregate_the_workers_of_a_machine(client, settings, tmp_path, monkeypatch):
    """scheduler_up points every child at one directory; /metrics then reports the workers' own histograms."""
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    swept = run_manage("run_liveness_sweep", "--once", database_url_value=current_database_url(),
                       PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    assert swept.returncode == 0, swept.stderr
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'scheduler_worker_tick_seconds_count{worker="liveness"} 1.0' in text
