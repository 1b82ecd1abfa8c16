"""TRM-1..5: first-write-wins recording, the synthetic-loss fence, one-statement settlement."""

import json

import pytest

from scheduler.runs import liveness, reads, settlement
from scheduler.errors import LeaseMismatch, NotFound
from tests import factories
from tests.factories import loads, one, query

pytestmark = pytest.mark.django_db


def _result_and_log(run_id):
    result, log = one("SELECT runner_result_json, runner_log_payload_json FROM attempts WHERE run_id = %s AND attempt = 1", [run_id])
    return loads(result), loads(log)


def _settle(parked, result, log_payload=None, attempt=1):
    """The production ingress of a runner's terminal (TRM-1): attempts_settle records and settles."""
    return settlement.settle_attempts([settlement.Settlement(parked.run_id, attempt, parked.lease_token, result,
                                                             None, log_payload, from_runner=True)])[0]


def _loss(parked, identity, attempt=1):
    """The production synthetic-loss ingress (TRM-2): attempts_record_runner_loss."""
    return liveness.record_runner_loss(parked.run_id, attempt, parked.lease_token, identity,
                                       factories.failed_result("runner_lost", verdict="runner_lost"),
                                       {"verdict": "runner_lost"})


@pytest.mark.requirement("TRM-1")
def test_record__first_write_wins__result_and_log_never_overwritten():
    parked = factories.parked_run(run_log_store="planet_scale")
    first = _settle(parked, factories.completed_result({"n": 1}), {"from": "first"})
    second = _settle(parked, factories.failed_result(), {"from": "second"})
    assert (first.recorded, first.is_this_result) == (True, True)
    assert (second.recorded, second.is_this_result) == (True, False)
    result, log = _result_and_log(parked.run_id)
    assert result["output"] == {"n": 1} and log == {"from": "first"}


@pytest.mark.requirement("TRM-1")
def test_record__a_second_result_on_a_recorded_unsettled_attempt__overwrites_neither_result_nor_log():
    parked = factories.parked_run(run_log_store="planet_scale")
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result({"n": 1}), {"from": "first"})
    second = _settle(parked, factories.failed_result(), {"from": "second"})
    assert (second.recorded, second.is_this_result, second.run_status) == (True, False, "completed")
    result, log = _result_and_log(parked.run_id)
    assert result["output"] == {"n": 1} and log == {"from": "first"}


def test_record__log_payload_kept_only_for_planet_scale_runs():
    parked = factories.parked_run()
    _settle(parked, factories.completed_result(), {"lines": ["x"]})
    assert _result_and_log(parked.run_id)[1] is None
    kept = factories.parked_run(run_log_store="planet_scale")
    _settle(kept, factories.completed_result(), {"lines": ["x"]})
    assert _result_and_log(kept.run_id)[1] == {"lines": ["x"]}


def test_record__unknown_attempt__false_and_nothing_invented():
    parked = factories.parked_run()
    outcome = _settle(parked, factories.completed_result(), attempt=9)
    assert (outcome.attempt_exists, outcome.recorded) == (False, False)
    assert one("SELECT count(*) FROM attempts WHERE run_id = %s", [parked.run_id]) == 1


@pytest.mark.requirement("TRM-3")
def test_synthetic_loss__matching_identity_records__stale_identity_refused():
    parked = factories.parked_run()
    query("UPDATE attempts SET heartbeat_at = '2026-01-01T00:00:00.000001Z' WHERE run_id = %s", [parked.run_id])
    assert _loss(parked, "2026-01-01T00:00:00.000000Z") == liveness.LossRecord(False, False)
    assert _result_and_log(parked.run_id)[0] is None
    assert _loss(parked, "2026-01-01T00:00:00.000001Z") == liveness.LossRecord(True, True)
    assert _result_and_log(parked.run_id)[0]["verdict"] == "runner_lost"


def test_synthetic_loss__null_identity_means_no_heartbeat_ever():
    parked = factories.parked_run()
    query("UPDATE attempts SET heartbeat_at = NULL WHERE run_id = %s", [parked.run_id])
    assert _loss(parked, None) == liveness.LossRecord(True, True)


@pytest.mark.requirement("TRM-3")
def test_heartbeat_one_microsecond_later__defeats_synthetic_loss_with_older_identity():
    from scheduler.runs import beats

    parked = factories.parked_run()
    # A heartbeat identity in the future makes the next bump exactly +1 µs.
    query("UPDATE attempts SET heartbeat_at = '2999-01-01T00:00:00.000000Z' WHERE run_id = %s", [parked.run_id])
    beat = beats.heartbeat(parked.run_id, 1, parked.lease_token)
    assert beat.heartbeat_identity == "2999-01-01T00:00:00.000001Z"
    assert _loss(parked, "2999-01-01T00:00:00.000000Z").recorded is False
    assert _result_and_log(parked.run_id)[0] is None


@pytest.mark.requirement("TRM-2")
def test_synthetic_loss__after_a_real_result__reports_recorded_without_overwriting():
    """TRM-2's "already recorded -> true" branch: the identity no longer matters, nothing is overwritten."""
    parked = factories.parked_run()
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    assert _loss(parked, "2000-01-01T00:00:00.000000Z") == liveness.LossRecord(False, True)
    assert _result_and_log(parked.run_id)[0]["status"] == "completed"
    settled = factories.parked_run()
    _settle(settled, factories.completed_result())  # recorded and settled: the attempt is no longer parked
    assert _loss(settled, None) == liveness.LossRecord(False, True)


def test_synthetic_loss__a_queued_cancel_or_a_newer_attempt__records_nothing():
    from scheduler.runs import lifecycle

    cancelled = factories.parked_run()
    query("UPDATE attempts SET heartbeat_at = NULL WHERE run_id = %s", [cancelled.run_id])
    lifecycle.cancel_run(cancelled.run_id, "test")
    assert _loss(cancelled, None) == liveness.LossRecord(False, False)
    newer = factories.parked_run()
    query("UPDATE attempts SET heartbeat_at = NULL WHERE run_id = %s", [newer.run_id])
    query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, 'claimed')", [newer.run_id])
    assert _loss(newer, None) == liveness.LossRecord(False, False)


@pytest.mark.requirement("CLN-1", "TRM-4")
def test_settle__completed__attempt_run_billing_cleanup_and_fact_in_one_go():
    """TRM-4 with CLN-1: the settling statement leaves the sandbox's cleanup obligation."""
    parked = factories.parked_run(provider="daytona", routing_domain="org-a")
    answer = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert answer == {"recorded": True, "settled": True, "runStatus": "completed"}
    assert one("SELECT status FROM attempts WHERE run_id = %s", [parked.run_id]) == "completed"
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "completed"
    assert one("SELECT status FROM compute_billing_jobs_v2 WHERE run_id = %s", [parked.run_id]) == "pending"
    assert query("SELECT provider, sandbox_id, routing_domain, attempt, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s",
                 [parked.run_id]) == [("daytona", parked.sandbox_id, "org-a", 1, "pending")]
    assert one("SELECT count(*) FROM outbox WHERE event_id = %s", [f"{parked.run_id}:run.completed"]) == 1


def test_settle__twice__second_is_a_no_op():
    parked = factories.parked_run()
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    before = factories.table_state()
    assert settlement.settle_attempt(parked.run_id, 1, parked.lease_token).run_status is None
    again = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert again["settled"] is False
    assert factories.table_state() == before


def test_settle__retryable_failure_with_attempts_left__run_queued_with_attempt_failed_fact():
    parked = factories.parked_run(max_attempts=2)
    answer = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.failed_result("runner_lost"))
    assert answer["runStatus"] == "queued"
    assert one("SELECT status, suspension_json FROM runs WHERE run_id = %s", [parked.run_id]) == ("queued", None)
    assert one("SELECT count(*) FROM outbox WHERE event_id = %s", [f"{parked.run_id}:1:run.attempt_failed"]) == 1
    assert one("SELECT count(*) FROM compute_billing_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 0
    # The retried attempt's sandbox still gets its cleanup obligation.
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s AND attempt = 1", [parked.run_id]) == 1
    second = factories.claim(parked.run_id)
    assert second.attempt == 2


def test_settle__retryable_failure_on_last_attempt__failed():
    parked = factories.parked_run(max_attempts=1)
    assert factories.report_terminal(parked.run_id, 1, parked.lease_token,
                                           factories.failed_result("runner_lost"))["runStatus"] == "failed"


def test_settle__non_retryable_failure__failed():
    parked = factories.parked_run(max_attempts=3)
    assert factories.report_terminal(parked.run_id, 1, parked.lease_token,
                                           factories.failed_result("wait_deadline_exceeded"))["runStatus"] == "failed"


def test_settle__newer_attempt_exists__refused():
    parked = factories.parked_run()
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    query("INSERT INTO attempts (run_id, attempt, status) VALUES (%s, 2, 'claimed')", [parked.run_id])
    assert settlement.settle_attempt(parked.run_id, 1, parked.lease_token).run_status is None
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "waiting"


def test_ingest__unknown_attempt_404__lease_mismatch_409():
    parked = factories.parked_run()
    with pytest.raises(NotFound):
        factories.report_terminal(parked.run_id, 5, parked.lease_token, factories.completed_result())
    with pytest.raises(LeaseMismatch):
        factories.report_terminal(parked.run_id, 1, "other-lease", factories.completed_result())
    assert _result_and_log(parked.run_id)[0] is None


@pytest.mark.requirement("TRM-7")
def test_recorded_terminals__per_release_lane_with_the_current_suspension():
    """TRM-7."""
    in_lane = factories.parked_run(launch={"absurdReleaseId": "rel-a"})
    other = factories.parked_run(launch={"absurdReleaseId": "rel-b"})
    for parked in (in_lane, other):
        factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    rows = reads.recorded_terminals_by_lane(["rel-a"])
    assert [(row["run_id"], row["release_id"]) for row in rows] == [(in_lane.run_id, "rel-a")]
    assert rows[0]["suspension_json"]["runtimeSandboxRef"]["sandboxId"] == in_lane.sandbox_id
    assert {row["run_id"] for row in reads.recorded_terminals_by_lane(["rel-a", "rel-b"])} == {in_lane.run_id, other.run_id}
    settlement.settle_attempt(in_lane.run_id, 1, in_lane.lease_token)
    assert [row["run_id"] for row in reads.recorded_terminals_by_lane(["rel-a"])] == []


def test_settle__nulls_inside_output_and_error_reach_the_terminal_fact_as_sent():
    parked = factories.parked_run()
    output = {"k": None, "items": [None, {"v": None}]}
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result(output))
    fact = loads(one("SELECT payload_json FROM outbox WHERE event_id = %s", [f"{parked.run_id}:run.completed"]))
    assert fact["output"] == output and "error" not in fact  # an absent key stays absent
    failing = factories.parked_run(max_attempts=1)
    error = {"code": "play_failed", "message": "m", "details": None}
    factories.report_terminal(failing.run_id, 1, failing.lease_token, {"status": "failed", "error": error})
    fact = loads(one("SELECT payload_json FROM outbox WHERE event_id = %s", [f"{failing.run_id}:run.failed"]))
    assert fact["error"] == error and "output" not in fact


def test_a_result_after_the_verdict__kept_beside_it__never_winning(client, settings):
    from scheduler.api import responses
    from scheduler.runs import lifecycle

    parked = factories.parked_run(max_attempts=1)
    lost = {"status": "failed", "error": {"code": "runner_lost", "message": "gone"}, "verdict": "runner_lost"}
    assert settlement.settle_attempt(parked.run_id, 1, parked.lease_token, lost).run_status == "failed"
    before = factories.table_state()
    late = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result({"n": 1}))
    assert late == {"recorded": False, "settled": False, "runStatus": "failed", "late": True}  # the run's status
    again = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result({"n": 2}))
    assert again["late"] is True
    after = factories.table_state()
    assert {table: after[table] for table in after if table != "late_runner_results"} == \
        {table: before[table] for table in before if table != "late_runner_results"}  # verdict, run, ledger unchanged
    assert loads(one("SELECT result_json FROM late_runner_results WHERE run_id = %s", [parked.run_id]))["output"] == {"n": 1}
    snapshot = responses.run_snapshot(lifecycle.run_status(parked.run_id))
    assert snapshot["status"] == "failed"
    assert [(item["attempt"], item["note"], item["result"]["output"]) for item in snapshot["lateResults"]] == \
        [(1, "finished after being declared lost", {"n": 1})]


def test_the_runner_posting_its_own_result_twice__recorded_not_late():
    parked = factories.parked_run()
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    again = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert again == {"recorded": True, "settled": False, "runStatus": None}
    assert one("SELECT count(*) FROM late_runner_results") == 0


def test_a_runner_posting_a_verdicts_error_code__is_the_runners_result__its_next_post_not_late():
    """A verdict is told by who recorded it, never by an error code a runner can send."""
    parked = factories.parked_run(max_attempts=1)
    posing = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.failed_result("runner_lost"))
    assert posing == {"recorded": True, "settled": True, "runStatus": "failed"}
    again = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert again == {"recorded": True, "settled": False, "runStatus": None}
    assert one("SELECT count(*) FROM late_runner_results") == 0


def test_a_runners_result_carrying_a_verdict__refused_at_the_edge__nothing_written(client, settings):
    from scheduler.runs.tokens import mint_runner_token

    parked = factories.parked_run()
    before = factories.table_state()
    body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token,
            "result": {"status": "failed", "error": {"code": "runner_lost"}, "verdict": "runner_lost"}}
    response = client.post("/internal/runner/terminal", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {mint_runner_token(parked.run_id, 1, parked.lease_token)}")
    assert response.status_code == 400 and response.json()["field"] == "result.verdict"
    assert factories.table_state() == before


def test_late_results__reader_first__a_schema_without_their_table_answers_as_before():
    from scheduler.runs import lifecycle

    parked = factories.parked_run(max_attempts=1)
    lost = {"status": "failed", "error": {"code": "runner_lost", "message": "gone"}, "verdict": "runner_lost"}
    settlement.settle_attempt(parked.run_id, 1, parked.lease_token, lost)
    query("DROP TABLE late_runner_results")  # rolled back with the test's transaction
    answer = factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert answer == {"recorded": True, "settled": False, "runStatus": None}
    assert lifecycle.run_status(parked.run_id).late_results == []
