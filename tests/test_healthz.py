"""GET /healthz: 200 on a ready database, 503 naming the cause otherwise."""

import pytest
from django.db import connection

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
