"""RUN-1..8: launch, claim, park, heartbeat, cancel, status, standing, array-input intent."""

import re
import datetime as dt

import pytest

from scheduler.api import responses
from scheduler.errors import InvalidInput, NotFound
from scheduler.runs import beats, launch_body, lifecycle
from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db


@pytest.mark.requirement("RUN-1")
def test_launch__inserts_queued_run_and_run_created_fact():
    run_id = factories.launch(org_id="org-9", input={"x": 1})
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
    assert query("SELECT event_id, event_type FROM outbox WHERE run_id = %s", [run_id]) == [
        (f"{run_id}:run.created", "run.created")
    ]


@pytest.mark.requirement("RUN-1")
@pytest.mark.parametrize("body,message", [
    ({}, "playName is required"),
    ({"playName": ""}, "playName must not be empty"),
    ({"playName": 3}, "playName must be a string"),
    ({"playName": "scheduler.plays:hello", "maxAttempts": 0}, "maxAttempts"),
    ({"playName": "scheduler.plays:hello", "maxAttempts": 2.0}, "maxAttempts must be an integer"),
    ({"playName": "scheduler.plays:hello", "launch": []}, "launch must be a JSON object"),
    ({"playName": "scheduler.plays:hello", "launch": {"absurdReleaseId": 5}}, "launch.absurdReleaseId"),
    ({"playName": "scheduler.plays:hello", "launch": {"arrayInputTerminalRetirementSupported": "yes"}}, "arrayInputTerminalRetirementSupported"),
    ({"playName": "scheduler.plays:hello", "runLogStore": "s3"}, "runLogStore"),
    ({"playName": "scheduler.plays:hello", "waitDeadline": "tomorrow"}, "waitDeadline"),
])
def test_launch__bad_input__clear_error(body, message):
    with pytest.raises(InvalidInput, match=message):
        launch_body.launch_request(body)


@pytest.mark.requirement("RUN-2")
def test_claim__creates_attempt_with_lease_moves_run_and_writes_started():
    run_id = factories.launch()
    claimed = factories.claim(run_id)
    assert (claimed.attempt, len(claimed.lease_token)) == (1, 32)
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "running"
    assert one("SELECT status FROM attempts WHERE run_id = %s", [run_id]) == "claimed"
    assert one("SELECT lease_expires_at > now() FROM attempts WHERE run_id = %s", [run_id]) is True
    assert one("SELECT count(*) FROM outbox WHERE event_id = %s", [f"{run_id}:1:run.started"]) == 1
    assert lifecycle.claim_queued_runs(5) == []


@pytest.mark.requirement("RUN-3")
def test_park__waiting_with_detached_suspension_and_resource():
    parked = factories.parked_run(provider="daytona", routing_domain="org-a")
    status, suspension, resources = one(
        "SELECT status, suspension_json, runtime_resources_json FROM runs WHERE run_id = %s", [parked.run_id]
    )
    suspension, resources = factories.loads(suspension), factories.loads(resources)
    assert status == "waiting"
    assert suspension["kind"] == "detached_runner" and suspension["runnerAttempt"] == 1
    assert suspension["runtimeSandboxRef"] == {"provider": "daytona", "sandboxId": parked.sandbox_id, "routingDomain": "org-a"}
    assert resources[0]["sandboxId"] == parked.sandbox_id and "billingStartedAt" in resources[0]
    assert one("SELECT status FROM attempts WHERE run_id = %s", [parked.run_id]) == "waiting"


@pytest.mark.requirement("RUN-3")
def test_park__wrong_lease__parks_nothing():
    run_id = factories.launch()
    claimed = factories.claim(run_id)
    assert not lifecycle.park(run_id, claimed.attempt, "not-the-lease", {"provider": "local", "sandboxId": "s"},
                              heartbeat_timeout_ms=1000, started_at_ms=0)
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "running"


@pytest.mark.requirement("RUN-4")
def test_heartbeat__current_attempt__bumps_and_reports_identity():
    parked = factories.parked_run()
    beat = beats.heartbeat(parked.run_id, parked.attempt, parked.lease_token)
    assert beat.current is True and beat.cancel_requested is False
    stored = one(
        "SELECT to_char(heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM attempts WHERE run_id = %s",
        [parked.run_id],
    )
    assert beat.heartbeat_identity == stored
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z", stored)  # TRM-3


@pytest.mark.requirement("RUN-4")
@pytest.mark.parametrize("fence", ["lease", "newer_attempt", "terminal_run", "other_attempt"])
def test_heartbeat__not_current__bumps_nothing(fence):
    parked = factories.parked_run()
    attempt, lease = parked.attempt, parked.lease_token
    if fence == "lease":
        lease = "wrong"
    elif fence == "newer_attempt":
        query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, 'claimed')", [parked.run_id])
    elif fence == "terminal_run":
        query("UPDATE runs SET status = 'failed' WHERE run_id = %s", [parked.run_id])
    else:
        attempt = 2
    beat = beats.heartbeat(parked.run_id, attempt, lease)
    assert beat.current is False and beat.heartbeat_identity is None
    assert one("SELECT heartbeat_at FROM attempts WHERE run_id = %s AND attempt = 1", [parked.run_id]) is None


@pytest.mark.requirement("RUN-7")
def test_cancel__queued_run__cancelled_directly_with_fact():
    run_id = factories.launch()
    answer = lifecycle.cancel_run(run_id)
    assert answer.cancelled_now is True
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "cancelled"
    assert one("SELECT count(*) FROM outbox WHERE event_id = %s", [f"{run_id}:run.cancelled"]) == 1
    assert one("SELECT count(*) FROM compute_billing_jobs_v2 WHERE run_id = %s", [run_id]) == 1


@pytest.mark.requirement("RUN-7")
def test_cancel__waiting_run__queued_and_told_by_next_heartbeat():
    parked = factories.parked_run()
    answer = lifecycle.cancel_run(parked.run_id)
    assert (answer.cancel_queued, answer.cancelled_now) == (True, False)
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "waiting"
    assert beats.heartbeat(parked.run_id, parked.attempt, parked.lease_token).cancel_requested is True


@pytest.mark.requirement("RUN-7")
def test_cancel__then_failed_terminal__settles_cancelled_without_retry():
    parked = factories.parked_run()
    lifecycle.cancel_run(parked.run_id)
    factories.report_terminal(parked.run_id, parked.attempt, parked.lease_token,
                                    factories.failed_result("runner_lost"))
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "cancelled"


def test_cancel__unknown_run__not_found():
    with pytest.raises(NotFound):
        lifecycle.cancel_run("run_missing")


@pytest.mark.requirement("RUN-8")
def test_status__snapshot_without_secrets_and_with_queried_schema():
    run_id = factories.launch(launch={"executorToken": "secret-executor", "runtimeBackend": "detached"},
                              run_log_store="planet_scale", definition_scope="org")
    snapshot = responses.run_snapshot(lifecycle.run_status(run_id))
    assert snapshot["schedulerSchema"] == "runtime_scheduler"
    assert snapshot["runLogStore"] == "planet_scale"
    assert snapshot["runtimeBackend"] == "detached"
    assert "definitionScope" not in snapshot
    assert "secret-executor" not in str(snapshot)
    assert responses.run_snapshot(lifecycle.run_status(run_id), include_definition_scope=True)["definitionScope"] == "org"
    assert "runLogStore" not in responses.run_snapshot(lifecycle.run_status(factories.launch()))


@pytest.mark.requirement("RUN-5")
def test_standing__reports_run_attempt_and_superseded():
    parked = factories.parked_run()
    assert responses.standing(lifecycle.attempt_standing(parked.run_id, 1)) == {"runStatus": "waiting", "attemptStatus": "waiting", "superseded": False}
    query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, 'released')", [parked.run_id])
    assert lifecycle.attempt_standing(parked.run_id, 1).superseded is True
    assert lifecycle.attempt_standing(parked.run_id, 7).attempt_status is None
    assert lifecycle.attempt_standing("run_missing", 1) is None


@pytest.mark.requirement("RUN-6")
def test_array_input_intent__registers_only_for_the_current_attempt_of_its_org():
    parked = factories.parked_run(org_id="org-a")
    assert lifecycle.register_array_input_intent(parked.run_id, "org-b", 1) is False
    assert lifecycle.register_array_input_intent(parked.run_id, "org-a", 2) is False
    assert one("SELECT array_input_started FROM runs WHERE run_id = %s", [parked.run_id]) is False
    assert lifecycle.register_array_input_intent(parked.run_id, "org-a", 1) is True
    assert one("SELECT array_input_started FROM runs WHERE run_id = %s", [parked.run_id]) is True
    with pytest.raises(NotFound):
        lifecycle.register_array_input_intent("run_missing", "org-a", 1)


@pytest.mark.requirement("RUN-6")
@pytest.mark.parametrize("newer_status,fences", [("claimed", True), ("failed", True), ("released", False)])
def test_array_input_intent__a_newer_attempt_fences_as_requirements_1_2_defines(newer_status, fences):
    """"No newer attempt" means no higher attempt in a fencing status; a released claim does not fence."""
    parked = factories.parked_run(org_id="org-a")
    query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, %s)", [parked.run_id, newer_status])
    assert lifecycle.register_array_input_intent(parked.run_id, "org-a", 1) is not fences


@pytest.mark.requirement("OBX-1")
def test_facts__created_at_strictly_increases_per_run_even_if_clock_is_behind():
    """OBX-1."""
    parked = factories.parked_run()
    # Pretend an earlier fact was written with a clock an hour ahead.
    query("UPDATE outbox SET created_at = now() + interval '1 hour' WHERE event_id = %s", [f"{parked.run_id}:1:run.waiting"])
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result(),
                                    progress_events=[{"n": 1}, {"n": 2}])
    rows = query("SELECT event_type, created_at FROM outbox WHERE run_id = %s ORDER BY created_at, event_id", [parked.run_id])
    assert [row[0] for row in rows] == ["run.created", "run.started", "run.waiting", "run.progress", "run.progress", "run.completed"]
    times = [row[1] for row in rows]
    assert all(later > earlier for earlier, later in zip(times, times[1:]))
    assert times[-1] - times[2] == dt.timedelta(microseconds=3)
