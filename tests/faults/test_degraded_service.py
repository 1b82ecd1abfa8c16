"""Faults the service meets in production: the database gone, a launch the dispatcher cannot start, a slow receiver."""

import json
import threading

import psycopg
import pytest
from django.db import connections

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.outbox.receivers import ledger_http
from scheduler.errors import InvalidInput
from scheduler.runs import dispatch, launch_body
from tests import factories
from tests.factories import loads, one, query
from tests.outbox.factories import claim_one
from tests.support import current_database_url

TOKEN = "internal-test-token"


@pytest.fixture
def database_unreachable(settings):
    """The default connection pointed at a port nothing listens on, for this test only."""
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT="1")
    yield
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("method,path,body", [
    ("post", "/internal/runs", {"playName": "scheduler.plays:hello", "orgId": "org-1"}),
    ("get", "/internal/runs/run_x", None),
    ("post", "/internal/runs/run_x/cancel", {}),
    ("get", "/internal/releases/rel-1/admission", None),
])
def test_database_unreachable__every_endpoint_answers_503_json(client, database_unreachable, method, path, body):
    response = getattr(client, method)(path, data=json.dumps(body) if body is not None else None,
                                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"
    assert response["Retry-After"] == "1"


@pytest.mark.django_db
@pytest.mark.parametrize("launch,field", [
    ({"heartbeatTimeoutMs": "soon"}, "launch.heartbeatTimeoutMs"),
    ({"heartbeatTimeoutMs": {"ms": 5}}, "launch.heartbeatTimeoutMs"),
    ({"sandboxProvider": ["local"]}, "launch.sandboxProvider"),
    ({"sandboxProvider": "kubernetes"}, "launch.sandboxProvider"),
    ({"runnerApiUrl": 8000}, "launch.runnerApiUrl"),
    ({"play": {"command": "ls"}}, "launch.play"),
    # The API's bounds, not looser ones of the dispatcher's own (one rule: runs/launch_rules.py).
    ({"heartbeatTimeoutMs": 500}, "launch.heartbeatTimeoutMs"),
    ({"play": {"command": ["x"] * 65}}, "launch.play.command"),
    ({"runnerApiUrl": "ftp://runner.example"}, "launch.runnerApiUrl"),
])
def test_dispatch__a_launch_it_cannot_start__failed_invalid_launch__the_next_claim_goes_on(launch, field):
    bad = factories.launch(launch=launch)
    query("UPDATE runs SET created_at = created_at - interval '1 hour' WHERE run_id = %s", [bad])
    good = factories.launch(launch={"sandboxProvider": "daytona", "routingDomain": "org-without-key"})
    tick = dispatch.run_once(limit=2)
    assert tick.counts["invalid_launch"] == 1 and tick.counts["claimed"] == 2
    result = loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s", [bad]))
    assert result["error"]["code"] == "invalid_launch" and field in result["error"]["message"]
    assert one("SELECT status FROM runs WHERE run_id = %s", [bad]) == "failed"  # not retried
    assert one("SELECT count(*) FROM attempts WHERE run_id = %s", [good]) == 1  # the next claim was dispatched
    with pytest.raises(InvalidInput) as refused:  # and the API refuses the same launch, naming the same field
        launch_body.launch_request({"playName": "tests.plays:fail", "launch": launch})
    assert refused.value.field.startswith(field)


@pytest.mark.django_db(transaction=True)
def test_a_queued_run__wakes_listening_dispatchers_that_armed_the_signal__busy_ones_are_not_notified():
    from scheduler.loop import arm_wake_signal

    channel = f"{scheduler_settings.schema}_run_queued"
    with psycopg.connect(current_database_url(), autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel}"')
        arm_wake_signal("run_queued")  # an idle dispatcher
        factories.launch()
        assert [note.channel for note in listener.notifies(timeout=10, stop_after=1)] == [channel]
        factories.launch()  # nobody re-armed (the dispatchers are busy): this commit notifies nobody
        arm_wake_signal("run_queued")
        factories.launch()
        assert len(list(listener.notifies(timeout=3, stop_after=2))) == 1


@pytest.mark.django_db(transaction=True)
def test_leases_kept__extended_while_the_block_runs__never_revived_or_taken_from_another():
    factories.launch()
    prefix = claim_one("ledger", "drainer-a", lease_seconds=0.6)
    other = factories.launch()
    stolen = claim_one("ledger", "drainer-b", lease_seconds=60)
    assert stolen.run_id == other
    before = one("SELECT max(lease_expires_at) FROM outbox WHERE lease_owner = 'drainer-a'")
    extended = threading.Event()
    with ledger_http.leases_kept("drainer-a", prefix.fact_ids + stolen.fact_ids, 0.6):
        for _ in range(200):
            if one("SELECT max(lease_expires_at) FROM outbox WHERE lease_owner = 'drainer-a'") > before:
                extended.set()
                break
            extended.wait(0.05)
    assert extended.is_set(), "the keeper never extended the lease"
    # drainer-b's lease is untouched: the keeper only extends its own.
    assert one("SELECT count(*) FROM outbox WHERE lease_owner = 'drainer-b' AND lease_expires_at > now() + interval '50 seconds'") == 1
    query("UPDATE outbox SET lease_expires_at = now() - interval '1 second' WHERE lease_owner = 'drainer-a'")
    assert db.fetch_all("outbox_extend_leases", {"event_ids": prefix.fact_ids, "lease_owner": "drainer-a",
                                                  "lease_seconds": 60}) == []  # an expired lease is never revived
