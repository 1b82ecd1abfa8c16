"""WAIT-2, WAIT-4, WAIT-5, WAIT-6 and the verdict fences, on the production statements with real attempts."""

import datetime as dt

import pytest

from scheduler.cleanup import billing_sweep, sandbox_sweep
from scheduler.errors import Conflict
from scheduler.fairshare import limits
from scheduler.kinds import WaitKind
from scheduler.runs import beats, lifecycle, liveness
from scheduler.runs.receipts import AttemptNotCurrent
from scheduler.waits import suspension, wakeups
from tests import factories
from tests.factories import loads, one, query
from tests.waits.conftest import begin, post_suspended, resumed_attempt, suspended_run

pytestmark = pytest.mark.django_db(transaction=True)
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)


def send(run_id: str, name: str = "approved", payload=None, event_id: str | None = None) -> wakeups.Sent:
    return wakeups.send(wakeups.Event.checked(run_id, name, payload, event_id))


def facts(run_id: str) -> list[str]:
    return [row[0] for row in query("SELECT event_type FROM outbox WHERE run_id = %s ORDER BY created_at, event_id",
                                    [run_id])]


@pytest.mark.requirement("WAIT-2")
def test_a_suspension_settles_the_attempt_waits_the_run_and_gives_the_sandbox_its_cleanup():
    parked = suspended_run(max_attempts=1)
    assert query("SELECT status, runner_result_json ->> 'status' FROM attempts WHERE run_id = %s",
                 [parked.run_id]) == [("suspended", "suspended")]
    status, suspension_json, deadline = query("SELECT status, suspension_json, wait_deadline FROM runs "
                                              "WHERE run_id = %s", [parked.run_id])[0]
    assert (status, loads(suspension_json)["kind"], loads(suspension_json)["event"], deadline) == (
        "waiting", "event", "approved", None)
    assert query("SELECT sandbox_id, attempt, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s",
                 [parked.run_id]) == [(parked.sandbox_id, 1, "pending")]
    assert facts(parked.run_id)[-1] == "run.suspended"
    assert one("SELECT count(*) FROM compute_billing_jobs_v2") == 0  # not a terminal: billing waits for the run


@pytest.mark.requirement("WAIT-2")
def test_a_suspended_attempt_does_not_count_against_max_attempts():
    parked = suspended_run(max_attempts=2)
    send(parked.run_id)
    second = resumed_attempt(parked.run_id)
    lost = factories.report_terminal(parked.run_id, second.attempt, second.lease_token,
                                     factories.failed_result("runner_lost"))
    # Attempt 2 is the run's first failure: with max_attempts 2 it is retried, not the run's end.
    assert lost["runStatus"] == "queued", lost


@pytest.mark.requirement("WAIT-4")
def test_a_timer_requeues_the_run_once_its_deadline_passed_through_the_durable_wait_index():
    parked = suspended_run(kind=WaitKind.TIMER, name=None, delay_ms=60_000)
    deadline = one("SELECT wait_deadline FROM runs WHERE run_id = %s", [parked.run_id])
    assert wakeups.wake_due(now=deadline - dt.timedelta(seconds=1)).counts["woken"] == 0
    tick = wakeups.wake_due(now=deadline)
    assert tick.counts["woken"] == 1 and one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "queued"
    assert wakeups.wake_due(now=LATER).counts["woken"] == 0
    assert loads(one("SELECT payload_json FROM outbox WHERE event_type = 'run.resumed'"))["reason"] == "deadline"


@pytest.mark.requirement("WAIT-4", "WAIT-5")
def test_a_resumed_timer_wait_answers_its_timeout_marker_and_a_replay_the_same():
    parked = suspended_run(kind=WaitKind.TIMER, name=None, delay_ms=60_000)
    # As if the minute had passed: the recorded deadline and the run's, both a second ago.
    query("UPDATE run_waits SET deadline = now() - interval '1 second' WHERE run_id = %s", [parked.run_id])
    query("UPDATE runs SET wait_deadline = now() - interval '1 second' WHERE run_id = %s", [parked.run_id])
    wakeups.wake_due()
    resumed = resumed_attempt(parked.run_id)
    first = begin(resumed, kind=WaitKind.TIMER, name=None, delay_ms=999_999)
    assert (first.outcome, first.output) == ("completed", {"timedOut": True})
    assert begin(resumed, kind=WaitKind.TIMER, name=None, delay_ms=1).output == {"timedOut": True}


@pytest.mark.requirement("WAIT-6")
def test_a_waiting_run_holds_no_slot_of_its_org_and_says_what_it_waits_for():
    limits.change("org-1", limits.LimitsChange(max_active=1), actor="test")
    parked = suspended_run(kind=WaitKind.EVENT)
    other = factories.launch()
    assert [claim.run_id for claim in lifecycle.claim_queued_runs(5)] == [other]
    snapshot = lifecycle.run_status(parked.run_id)
    assert snapshot.queued_because == "event" and snapshot.wait["event"] == "approved"
    assert limits.read("org-1").active == 1


@pytest.mark.requirement("WAIT-6")
def test_a_cancel_of_a_waiting_run_settles_it_at_once_and_an_event_after_is_refused():
    parked = suspended_run()
    outcome = lifecycle.cancel_run(parked.run_id, "no longer wanted")
    assert outcome.cancelled_now
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "cancelled"
    assert one("SELECT count(*) FROM compute_billing_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 1
    assert facts(parked.run_id)[-2:] == ["run.suspended", "run.cancelled"]
    with pytest.raises(wakeups.RunFinished):
        send(parked.run_id)
    assert one("SELECT count(*) FROM run_events") == 0


def test_a_cancel_queued_before_the_suspension_cancels_the_run_when_it_suspends():
    parked = factories.parked_run()
    assert begin(parked).outcome == "suspend"
    lifecycle.cancel_run(parked.run_id, "stop")
    assert post_suspended(parked).run_status == "cancelled"
    assert facts(parked.run_id)[-2:] == ["run.suspended", "run.cancelled"]
    assert one("SELECT count(*) FROM compute_billing_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 1


def test_a_late_heartbeat_terminal_or_wait_of_a_suspended_attempt_is_fenced():
    parked = suspended_run()
    assert not beats.heartbeat(parked.run_id, parked.attempt, parked.lease_token).current
    before = factories.table_state()
    late = factories.report_terminal(parked.run_id, parked.attempt, parked.lease_token, factories.completed_result())
    assert late["runStatus"] is None and factories.table_state() == before
    assert post_suspended(parked).run_status is None and factories.table_state() == before
    with pytest.raises(AttemptNotCurrent):
        begin(parked)


def test_the_sweep_never_judges_a_waiting_runs_released_sandbox_lost():
    parked = suspended_run()
    tick = liveness.run_once(now=LATER)
    assert tick.counts["verdicts"] == 0
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "waiting"


def test_a_wait_key_a_step_holds_or_another_wait_is_a_conflict_and_writes_nothing():
    parked = factories.parked_run()
    assert begin(parked, key="approval").outcome == "suspend"
    with pytest.raises(Conflict):
        begin(parked, key="approval", name="rejected")
    from scheduler.runs import receipts

    caller = receipts.Caller(parked.run_id, parked.attempt, parked.lease_token)
    receipts.claim(caller, ["charge"])
    before = factories.table_state()
    with pytest.raises(suspension.WaitKeyConflict):
        begin(parked, key="charge")
    assert factories.table_state() == before


@pytest.mark.requirement("WAIT-5")
def test_a_hundred_suspensions_of_one_run__facts_in_causal_order__one_cleanup_and_span_per_sandbox():
    parked = current = resumed_attempt(factories.launch(max_attempts=3))
    for number in range(100):
        key = f"wait-{number}"
        assert begin(current, key=key).outcome == "suspend"
        assert post_suspended(current, key).run_status == "waiting"
        assert send(parked.run_id, payload=number, event_id=f"e-{number}").resumed
        current = resumed_attempt(parked.run_id)
        assert begin(current, key=key).output["event"]["payload"] == number
    factories.report_terminal(parked.run_id, current.attempt, current.lease_token, factories.completed_result())
    expected = ["run.created", "run.started", "run.waiting"]
    for _ in range(100):
        expected += ["run.suspended", "run.resumed", "run.started", "run.waiting"]
    assert facts(parked.run_id) == expected + ["run.completed"]
    sandboxes = query("SELECT sandbox_id, attempt FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s ORDER BY attempt",
                      [parked.run_id])
    assert [attempt for _, attempt in sandboxes] == list(range(1, 102))
    assert len({sandbox for sandbox, _ in sandboxes}) == 101
    assert one("SELECT count(*) FROM attempts WHERE run_id = %s AND status = 'suspended'", [parked.run_id]) == 100
    while sandbox_sweep.run_once(["local"], "cleaner", limit=50).counts["claimed"]:
        pass
    assert billing_sweep.run_once("biller").counts["finalized"] == 1
    spans = query("SELECT sandbox_id, count(*) FROM billing_items WHERE run_id = %s GROUP BY 1", [parked.run_id])
    assert len(spans) == 101 and {count for _, count in spans} == {1}  # one billing span per sandbox
