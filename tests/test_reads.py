"""Seed parity: the reads the seed's backend has (runner liveness, standing without an attempt, a terminal
run's array-input intent, recorded terminals over several lanes) and the details it words or computes so."""

import datetime as dt
import logging

import pytest
from django.db import connection

from scheduler import messages
from scheduler.errors import InvalidInput
from scheduler.runs import admission, beats, lifecycle, liveness, reads, settlement
from scheduler.outbox import claims
from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db
TOKEN = "reads-token"
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)


@pytest.fixture
def api(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN

    def get(path):
        response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        return response.status_code, response.json()

    return get


def test_runner_liveness__heartbeat_identity_to_the_microsecond(api):
    parked = factories.parked_run()
    beat = beats.heartbeat(parked.run_id, 1, parked.lease_token)
    found = reads.runner_liveness(parked.run_id, 1)
    assert found.status == "waiting" and found.heartbeat_identity == beat.heartbeat_identity
    status, body = api(f"/internal/runs/{parked.run_id}/attempts/1/liveness")
    assert status == 200 and body["heartbeatIdentity"] == beat.heartbeat_identity and body["status"] == "waiting"
    assert api(f"/internal/runs/{parked.run_id}/attempts/2/liveness")[0] == 404
    assert api(f"/internal/runs/{parked.run_id}/attempts/x/liveness")[1]["field"] == "attempt"


def test_standing_without_an_attempt__the_seeds_null_attempt(api):
    parked = factories.parked_run()
    assert api(f"/internal/runs/{parked.run_id}/standing") == (
        200, {"runStatus": "waiting", "attemptStatus": None, "superseded": False})
    assert api("/internal/runs/run-missing/standing")[0] == 404


def test_terminal_array_input_intent__org_bound_terminal_only(api):
    parked = factories.parked_run(org_id="org-a", play_name="plays:arrays")
    assert lifecycle.register_array_input_intent(parked.run_id, "org-a", 1)
    assert reads.terminal_array_input_intent(parked.run_id, "org-a") == reads.ArrayInputIntent(None, False)  # open
    settlement.settle_attempt(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert reads.terminal_array_input_intent(parked.run_id, "org-a") == reads.ArrayInputIntent("plays:arrays", True)
    assert reads.terminal_array_input_intent(parked.run_id, "org-b") == reads.ArrayInputIntent(None, False)
    assert reads.terminal_array_input_intent(parked.run_id) == reads.ArrayInputIntent("plays:arrays", True)
    assert api(f"/internal/runs/{parked.run_id}/terminal-array-input-intent?orgId=org-a")[1] == {
        "runId": parked.run_id, "playName": "plays:arrays", "started": True}
    assert api(f"/internal/runs/{parked.run_id}/terminal-array-input-intent")[1]["field"] == "orgId"


def test_terminal_array_input_intent__reader_first_on_a_v63_schema():
    parked = factories.parked_run(org_id="org-a")
    settlement.settle_attempt(parked.run_id, 1, parked.lease_token, factories.completed_result())
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute("ALTER TABLE runs DROP COLUMN array_input_started")
    assert reads.terminal_array_input_intent(parked.run_id, "org-a") == reads.ArrayInputIntent(None, False)


def test_recorded_terminals__several_lanes_at_once_with_a_per_lane_limit(api):
    lanes = {}
    for release in ("rel-a", "rel-a", "rel-b", None, None):
        parked = factories.parked_run(launch={"absurdReleaseId": release} if release else {})
        query("UPDATE attempts SET runner_result_json = %s::jsonb WHERE run_id = %s",
              ['{"status": "completed", "output": {}}', parked.run_id])
        lanes.setdefault(release, []).append(parked.run_id)
    rows = reads.recorded_terminals_by_lane(["rel-a", "rel-b"], include_unreleased=True, lane_limit=1)
    assert [(row["release_id"], row["run_id"]) for row in rows] == [
        ("rel-a", min(lanes["rel-a"])), ("rel-b", lanes["rel-b"][0]), (None, min(lanes[None]))]
    assert len(reads.recorded_terminals_by_lane(["rel-a"], lane_limit=5)) == 2
    status, body = api("/internal/runner-terminals?release=rel-a&unreleased=true&limit=5")
    assert status == 200 and len(body["terminals"]) == 4 and "leaseToken" not in body["terminals"][0]
    with pytest.raises(InvalidInput):
        reads.recorded_terminals_by_lane([], include_unreleased=False)


@pytest.mark.parametrize("runner_attempt,found", [(1, True), ("1", True), ("one", False), ("99999999999", False)])
def test_discovery__runner_attempt_read_as_text_and_cast(runner_attempt, found):
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    query("UPDATE attempts SET heartbeat_at = '2026-03-01T10:00:00.123456Z' WHERE run_id = %s", [parked.run_id])
    query("UPDATE runs SET suspension_json = jsonb_set(suspension_json, '{runnerAttempt}', %s::jsonb) WHERE run_id = %s",
          [f'"{runner_attempt}"' if isinstance(runner_attempt, str) else str(runner_attempt), parked.run_id])
    rows = liveness.discover(100, 60_000, None, LATER)
    assert bool(rows) is found
    if found:
        assert rows[0]["heartbeat_at_ms"] == int(dt.datetime(2026, 3, 1, 10, 0, 0, 123456, dt.UTC).timestamp() * 1000)


def test_verdict__sets_heartbeat_at_as_the_seeds():
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 hour' WHERE run_id = %s", [parked.run_id])
    before = one("SELECT heartbeat_at FROM attempts WHERE run_id = %s", [parked.run_id])
    [row] = liveness.discover(100, 60_000, None, LATER)
    assert liveness.record_verdict("runner_lost", row, factories.failed_result("runner_lost"), LATER,
                                   row["heartbeat_identity"])
    assert one("SELECT heartbeat_at FROM attempts WHERE run_id = %s", [parked.run_id]) > before


def test_refusals_read_as_the_seeds():
    with pytest.raises(InvalidInput, match="^Runtime release admission requires releaseId.$"):
        admission.admission_keys("  ")
    with pytest.raises(InvalidInput, match="^Runtime release admission requires a non-negative safe-integer "
                                           "admissionEpoch.$"):
        admission.set_admission("rel-m", True, -1)
    admission.set_admission("rel-m", False, 5)
    with pytest.raises(Exception) as refused:
        admission.set_admission("rel-m", True, 4)
    assert refused.value.message == 'Runtime release admission opening refused for "rel-m" at epoch 4.'
    with pytest.raises(InvalidInput, match="^Outbox admission discovery requires1–3 hints"):
        claims.admission_hints(4, [])


@pytest.mark.requirement("CLN-2")
@pytest.mark.django_db(transaction=True)  # so that closing the connection below really replaces it
def test_adoption_preflight__an_answer_that_is_not_a_boolean__refused_in_the_seeds_words():
    """CLN-2: the preflight's answer must be a boolean proof; a driver or proxy that hands back text (here: this
    connection's boolean loader swapped for the text one) is refused, never read as truthy."""
    from psycopg.types.string import TextLoader

    from scheduler.cleanup import obligations

    connection.ensure_connection()
    assert obligations.adoption_pending() is False
    # A fresh connection: the statements' cursor is kept per connection, with the loaders it was made with.
    connection.close()
    connection.ensure_connection()
    connection.connection.adapters.register_loader("bool", TextLoader)
    try:
        with pytest.raises(RuntimeError) as refused:
            obligations.adoption_pending()
    finally:
        connection.close()
    assert str(refused.value) == "Sandbox cleanup adoption preflight returned no pending proof."


def test_late_billing_wait__logged_in_the_seeds_words(caplog):
    from scheduler.cleanup import billing_sweep

    parked = factories.parked_run(provider="daytona")
    settlement.settle_attempt(parked.run_id, 1, parked.lease_token, factories.completed_result())
    caplog.set_level(logging.INFO, logger="scheduler.billing")
    # Due at its recheck, its sandbox's cleanup not confirmed by then.
    tick = billing_sweep.run_once("billing-test", now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=31))
    assert tick.counts["waiting"] == 1  # its sandbox's delete is not confirmed, its ceiling not reached
    assert f"billing run={parked.run_id}: {messages.LATE_BILLING_WAITING}" in caplog.text


@pytest.mark.parametrize("attempt", ["x", "0", "²", "1" * 12, "-1"])
def test_an_attempt_in_the_path_that_is_no_attempt__400_naming_it(api, attempt):
    parked = factories.parked_run()
    for path in (f"/internal/runs/{parked.run_id}/attempts/{attempt}/liveness",
                 f"/internal/runs/{parked.run_id}/attempts/{attempt}/standing"):
        status, body = api(path)
        assert (status, body["field"]) == (400, "attempt"), (path, body)
