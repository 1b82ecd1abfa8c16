"""SWP-1, SWP-2, SWP-4: discovery keeps runners that need no action out; the verdict is fenced."""

import datetime as dt
import json

import psycopg
import pytest
from django.db import transaction

from scheduler import db
from scheduler.runs import lifecycle, liveness, settlement
from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
IDENTITY = "2026-03-01T10:00:00.000001Z"


def stale_run(provider="local", **overrides):
    parked = factories.parked_run(provider=provider, heartbeat_timeout_ms=1000, **overrides)
    query("UPDATE attempts SET heartbeat_at = %s::timestamptz WHERE run_id = %s", [IDENTITY, parked.run_id])
    return parked


def inspected(limit=100, after=None, now=LATER):
    return [row["run_id"] for row in liveness.discover(limit, 60_000, after, now) if row["work"] == "inspect"]


def test_discovery__stale_parked_runner__inspected_with_its_heartbeat_identity():
    parked = stale_run()
    rows = liveness.discover(100, 60_000, None, LATER)
    assert [(r["work"], r["run_id"], r["heartbeat_identity"]) for r in rows] == [("inspect", parked.run_id, IDENTITY)]


def test_discovery__fresh_heartbeat__left_out():
    parked = stale_run()
    assert inspected(now=dt.datetime(2026, 3, 1, 10, 0, 0, 500000, tzinfo=dt.UTC)) == []
    assert inspected() == [parked.run_id]


@pytest.mark.parametrize("exclusion", ["queued_cancel", "passed_wait_deadline", "newer_attempt", "result_recorded"])
def test_discovery__each_exclusion_keeps_the_runner_out_of_inspection(exclusion):
    parked = stale_run()
    if exclusion == "queued_cancel":
        lifecycle.cancel_run(parked.run_id)
    elif exclusion == "passed_wait_deadline":
        query("UPDATE runs SET wait_deadline = now() - interval '1 minute' WHERE run_id = %s", [parked.run_id])
    elif exclusion == "newer_attempt":
        query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, 'claimed')", [parked.run_id])
    else:
        factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    assert inspected() == []


def test_discovery__recorded_terminal__offered_for_settlement():
    parked = stale_run()
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    rows = liveness.discover(100, 60_000, None, LATER)
    assert [(r["work"], r["run_id"]) for r in rows] == [("settle", parked.run_id)]


@pytest.mark.requirement("SWP-2")
def test_discovery__per_provider_pages__a_deep_daytona_backlog_does_not_starve_others():
    with_daytona = [stale_run("daytona", routing_domain="org") for _ in range(5)]
    # 500 more daytona candidates, inserted in bulk with run ids that sort first.
    query(
        """
        INSERT INTO runs (run_id, play_name, status, suspension_json, launch_json)
        SELECT 'a-daytona-' || lpad(i::text, 4, '0'), 'p', 'waiting',
               jsonb_build_object('kind', 'detached_runner', 'runnerAttempt', 1, 'startedAtMs', 0,
                                  'heartbeatTimeoutMs', 1000,
                                  'runtimeSandboxRef', jsonb_build_object('provider', 'daytona', 'sandboxId', 'sb' || i)), '{}'
        FROM generate_series(1, 500) AS i;
        INSERT INTO attempts (run_id, attempt, status, lease_token)
        SELECT 'a-daytona-' || lpad(i::text, 4, '0'), 1, 'waiting', 'l' || i FROM generate_series(1, 500) AS i;
        """
    )
    modal, local = stale_run("modal", routing_domain="ws"), stale_run("local")
    rows = liveness.discover(10, 60_000, None, LATER)
    by_provider = {}
    for row in rows:
        by_provider.setdefault(row["provider"], []).append(row["run_id"])
    assert len(by_provider["daytona"]) == 10
    assert by_provider["modal"] == [modal.run_id] and by_provider["local"] == [local.run_id]
    assert len(with_daytona) == 5


def test_discovery__cursor_walks_past_candidates_already_read():
    runs = sorted(stale_run().run_id for _ in range(5))
    page_one = inspected(limit=2)
    assert page_one == runs[:2]
    page_two = inspected(limit=2, after={"local": page_one[-1]})
    assert page_two == runs[2:4]
    result = liveness.LivenessTick()
    result.cursors, result.inspected_by_provider = {"local": runs[1]}, {"local": 2}
    assert liveness.next_cursors(result, 2) == {"local": runs[1]}
    result.inspected_by_provider = {"local": 1}
    assert liveness.next_cursors(result, 2) == {}


def verdict(parked, identity=IDENTITY, kind="runner_lost"):
    if kind == "runner_lost":
        return int(liveness.record_runner_loss(parked.run_id, parked.attempt, parked.lease_token, identity,
                                               factories.failed_result("runner_lost", verdict="runner_lost"), {}).recorded_now)
    return db.execute("attempts_record_parked_verdict", {
        "run_id": parked.run_id, "attempt": parked.attempt, "lease_token": parked.lease_token, "kind": kind,
        "expected_heartbeat_at": identity, "now": None,
        "result": json.dumps(factories.failed_result("runner_lost")), "log_payload": json.dumps({}),
    })


def test_verdict__nothing_moved__recorded():
    assert verdict(stale_run()) == 1


FENCES = {
    "run_not_waiting": "UPDATE runs SET status = 'running' WHERE run_id = %(run)s",
    "parked_on_another_attempt": "UPDATE runs SET suspension_json = jsonb_set(suspension_json, '{runnerAttempt}', '2') WHERE run_id = %(run)s",
    "attempt_not_waiting": "UPDATE attempts SET status = 'running' WHERE run_id = %(run)s",
    "lease_changed": "UPDATE attempts SET lease_token = 'another' WHERE run_id = %(run)s",
    "heartbeat_moved": "UPDATE attempts SET heartbeat_at = heartbeat_at + interval '1 microsecond' WHERE run_id = %(run)s",
    "result_recorded": "UPDATE attempts SET runner_result_json = '{\"status\": \"completed\"}' WHERE run_id = %(run)s",
    "newer_attempt": "INSERT INTO attempts (run_id, attempt, status) VALUES (%(run)s, 2, 'claimed')",
    "cancel_queued": "INSERT INTO control (key) VALUES ('runtime_cancel:' || %(run)s)",
}


@pytest.mark.parametrize("fence", sorted(FENCES))
def test_verdict__a_fact_moved_after_discovery__no_verdict(fence):
    parked = stale_run()
    assert inspected() == [parked.run_id]
    query(FENCES[fence], {"run": parked.run_id})
    assert verdict(parked) == 0
    if fence != "result_recorded":
        assert one("SELECT runner_result_json FROM attempts WHERE run_id = %s AND attempt = 1", [parked.run_id]) is None


def test_verdict__released_newer_claim_does_not_fence():
    parked = stale_run()
    query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, 'released')", [parked.run_id])
    assert verdict(parked) == 1


def test_verdict__a_misspelt_kind_fails_loudly_in_python_and_in_the_statement():
    """A kind the statement does not know must never read as "fenced" (a silent no-op)."""
    parked = stale_run()
    row = {"run_id": parked.run_id, "attempt": parked.attempt, "lease_token": parked.lease_token}
    with pytest.raises(ValueError, match="runer_lost"):
        liveness.record_verdict("runer_lost", row, factories.failed_result("runner_lost"), None, IDENTITY)
    with pytest.raises(psycopg.errors.InvalidTextRepresentation, match="unknown verdict kind: runer_lost"):
        with transaction.atomic():
            verdict(parked, kind="runer_lost")
    assert verdict(parked, kind=liveness.VerdictKind.RUNNER_LOST) == 1
