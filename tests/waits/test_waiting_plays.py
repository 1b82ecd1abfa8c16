"""WAIT-1, WAIT-2, WAIT-3, WAIT-5 end to end: real runners in local sandboxes wait for an event with their sandbox
released, and resume in a new one with their finished steps memoized."""

import datetime as dt
import json
import urllib.request

import pytest

from scheduler.cleanup import billing_sweep, sandbox_sweep
from scheduler.providers.local import reap_children
from scheduler.runs import dispatch, lifecycle, liveness
from scheduler.waits import wakeups
from tests import factories
from tests.e2e.conftest import local_sandboxes  # noqa: F401 - the fixture
from tests.e2e.test_durable_play import effects, ran  # noqa: F401 - the fixture, and what it read
from tests.factories import loads, one, query
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "waiting-plays-token"


@pytest.fixture
def sandboxes(local_sandboxes, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    return local_sandboxes


def _launch(play_input: dict, play: str = "scheduler.plays:approval_order") -> str:
    return factories.launch(input=play_input, launch={"play": {"callable": play},
                                                      "sandboxProvider": "local", "heartbeatTimeoutMs": 1000})


def _send(server, run_id: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(f"{server.url}/internal/runs/{run_id}/events", data=json.dumps(body).encode(),
                                     method="POST", headers={"Authorization": f"Bearer {TOKEN}",
                                                             "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, json.loads(response.read())


def _waiting(run_id: str) -> bool:
    return one("SELECT status = 'waiting' AND suspension_json ->> 'kind' = 'event' FROM runs WHERE run_id = %s",
               [run_id])


def _finished(run_id: str) -> dict:
    wait_for(lambda: lifecycle.run_status(run_id).status in ("completed", "failed", "cancelled"), "the run finishing")
    return loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))


def _facts(run_id: str) -> list[str]:
    return [row[0] for row in query("SELECT event_type FROM outbox WHERE run_id = %s ORDER BY created_at, event_id",
                                    [run_id])]


@pytest.mark.requirement("WAIT-1", "WAIT-2", "WAIT-3", "WAIT-5")
def test_a_four_step_play_waits_for_an_event_released_and_resumes_without_rerunning_its_steps(sandboxes, effects):
    run_id = _launch({"order": "A-9", "effectsFile": str(effects)}, "tests.plays:lingering_approval_order")
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: _waiting(run_id), "the play suspending on its wait")
    assert query("SELECT attempt, status FROM attempts WHERE run_id = %s", [run_id]) == [(1, "suspended")]
    assert lifecycle.run_status(run_id).wait == {"kind": "event", "key": "approval", "event": "approved",
                                                 "since": lifecycle.run_status(run_id).wait["since"]}
    # The released sandbox is deleted now, while the play waits: its billing span ends at the delete's acceptance.
    swept = sandbox_sweep.run_once(["local"], "cleaner")
    assert (swept.counts["accepted"], swept.counts["confirmed"]) == (1, 1)
    [(first_sandbox, first_accepted)] = query(
        "SELECT job.sandbox_id, event.created_at FROM sandbox_cleanup_jobs_v2 AS job "
        "JOIN sandbox_cleanup_events_v2 AS event ON event.sandbox_id = job.sandbox_id "
        "AND event.event_type = 'provider_delete_accepted' WHERE job.run_id = %s", [run_id])

    sent_at = dt.datetime.now(dt.UTC)
    assert _send(sandboxes, run_id, {"name": "approved", "payload": {"by": "ann"}, "eventId": "approval-1"}) == (
        201, {"eventId": "approval-1", "stored": True, "resumed": True})
    assert dispatch.run_once(5).counts["parked"] == 1
    result = _finished(run_id)
    assert result["status"] == "completed" and result["output"]["approval"] == {"by": "ann"}
    assert ran(effects, run_id) == sorted([("reserve-stock", 1), ("charge-card", 1), ("send-receipt", 2),
                                           ("ship-parcel", 2)])
    assert _facts(run_id) == ["run.created", "run.started", "run.waiting", "run.suspended", "run.resumed",
                              "run.started", "run.waiting", "run.completed"]

    assert sandbox_sweep.run_once(["local"], "cleaner").counts["confirmed"] == 1
    assert billing_sweep.run_once("biller").counts["finalized"] == 1
    spans = dict(query("SELECT sandbox_id, billing_ended_at FROM billing_items WHERE run_id = %s", [run_id]))
    assert len(spans) == 2, spans  # one span per sandbox
    assert abs((spans[first_sandbox] - first_accepted).total_seconds()) < 0.001
    assert spans[first_sandbox] < sent_at  # not billed while the play waited


@pytest.mark.requirement("WAIT-3")
def test_an_event_sent_before_the_wait_is_kept_for_it_and_the_play_never_suspends(sandboxes, effects):
    run_id = _launch({"order": "A-10", "effectsFile": str(effects)})
    assert _send(sandboxes, run_id, {"name": "approved", "payload": "early", "eventId": "e-early"}) == (
        201, {"eventId": "e-early", "stored": True, "resumed": False})
    assert dispatch.run_once(5).counts["parked"] == 1
    assert _finished(run_id)["output"]["approval"] == "early"
    assert query("SELECT attempt, status FROM attempts WHERE run_id = %s", [run_id]) == [(1, "completed")]
    assert one("SELECT consumed_key FROM run_events WHERE run_id = %s", [run_id]) == "approval"


@pytest.mark.requirement("WAIT-4")
def test_a_wait_whose_timeout_passes_resumes_with_the_timeout_marker(sandboxes, effects):
    run_id = _launch({"order": "A-11", "effectsFile": str(effects), "timeout": 0.2})
    assert dispatch.run_once(5).counts["parked"] == 1

    def finished() -> bool:
        wakeups.wake_due()
        dispatch.run_once(5)
        return lifecycle.run_status(run_id).status in ("completed", "failed")

    wait_for(finished, "the wait timing out and the play finishing")
    output = _finished(run_id)["output"]
    assert output["approval"] == "timed out" and set(output["steps"]) == {"reserve-stock", "charge-card"}
    assert loads(one("SELECT payload_json FROM outbox WHERE run_id = %s AND event_type = 'run.resumed'",
                     [run_id]))["reason"] == "deadline"


@pytest.mark.requirement("WAIT-2", "WAIT-5")
def test_runner_killed_between_recording_the_wait_and_posting_suspended__the_retry_suspends_on_the_same_wait(
        sandboxes, effects):
    run_id = _launch({"order": "A-12", "effectsFile": str(effects), "interrupt": "kill-runner"})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: one("SELECT count(*) FROM run_waits WHERE run_id = %s", [run_id]) == 1, "the wait recorded")
    wait_for(lambda: (reap_children(), liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)))[1]
             .counts["verdicts"], "the sweep's runner_lost verdict")
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: _waiting(run_id), "the retry suspending on the same wait")
    assert query("SELECT attempt, status FROM attempts WHERE run_id = %s ORDER BY attempt", [run_id]) == [
        (1, "failed"), (2, "suspended")]
    assert query("SELECT key, attempt FROM run_waits WHERE run_id = %s", [run_id]) == [("approval", 1)]

    assert _send(sandboxes, run_id, {"name": "approved", "payload": {"by": "bo"}})[1]["resumed"] is True
    assert dispatch.run_once(5).counts["parked"] == 1
    assert _finished(run_id)["output"]["approval"] == {"by": "bo"}
    assert ran(effects, run_id) == sorted([("reserve-stock", 1), ("charge-card", 1), ("send-receipt", 3),
                                           ("ship-parcel", 3)])
