"""HA-1: a process whose server stops taking writes (a demoted primary that keeps its sessions) moves on: the write
is refused (a 503 with Retry-After on the API), the connection is dropped at the end of the tick or the request, and
the next one is opened afresh, which libpq's target_session_attrs=read-write points at the primary."""

import psycopg
import pytest
from django.db import connection

from scheduler import db
from scheduler.runs import launches
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _read_only_session() -> int:
    """This session now refuses writes, as a server turned standby would; its backend pid."""
    with connection.cursor() as cursor:
        cursor.execute("SET default_transaction_read_only = on")
    return _backend_pid()


@pytest.mark.requirement("HA-1")
def test_a_loop_whose_write_is_refused_as_read_only__reconnects_before_its_next_tick():
    before = _read_only_session()
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        factories.launch()
    db.refresh_connections(0.0)  # what a loop does before its next tick
    assert _backend_pid() != before
    assert factories.launch()  # the new session takes writes


@pytest.mark.requirement("HA-1")
def test_an_api_write_refused_as_read_only__503_retry_after__the_next_request_reconnects(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    settings.SCHEDULER_LAUNCH_BATCH_SIZE = 1  # the launch on the request's own (read-only) connection
    before = _read_only_session()
    refused = client.post("/internal/runs", data={"playName": "scheduler.plays:hello"}, content_type="application/json",
                          HTTP_AUTHORIZATION="Bearer t")
    assert refused.status_code == 503 and refused["Retry-After"] == "1", refused.content
    assert refused.json()["error"] == "database_unavailable"
    taken = client.post("/internal/runs", data={"playName": "scheduler.plays:hello"}, content_type="application/json",
                        HTTP_AUTHORIZATION="Bearer t")
    assert taken.status_code == 201 and _backend_pid() != before


@pytest.mark.requirement("HA-1")
def test_a_grouped_api_launch_refused_as_read_only__503__and_the_group_launcher_reconnects(client, settings):
    """The group launcher's own connection meets the read-only server (every new session is one here): the launch
    is refused with a 503, and once the server takes writes again the launcher's next connection does."""
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    database = factories.one("SELECT current_database()")
    factories.query(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    launcher = launches.shared_launcher()
    # As if another launch were running alone on its request thread: these are handed to the group launcher.
    assert launcher._claim_idle()
    try:
        try:
            refused = client.post("/internal/runs", data={"playName": "scheduler.plays:hello"},
                                  content_type="application/json", HTTP_AUTHORIZATION="Bearer t")
            assert refused.status_code == 503 and refused.json()["error"] == "database_unavailable", refused.content
        finally:
            factories.query(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        taken = client.post("/internal/runs", data={"playName": "scheduler.plays:hello"},
                            content_type="application/json", HTTP_AUTHORIZATION="Bearer t")
        assert taken.status_code == 201, taken.content
        assert launcher.statements >= 1
    finally:
        launcher._landed(1)
