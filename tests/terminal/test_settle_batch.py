"""One settle statement for many attempts decides each exactly as settling it alone would."""

import dataclasses
import json

import pytest

from scheduler import db
from scheduler.runs import beats, lifecycle, liveness, settlement
from tests import factories

pytestmark = pytest.mark.django_db

PERFORMANCE_LAUNCH = {"contractSnapshot": {"compatibility": {"terminalRuntimePerformanceSupported": True}}}
STATS = {"runtimeResources": {"cpuMs": 5, "wallMs": 9, "peakMemoryBytes": 1024}}


def _scenarios() -> list[settlement.Settlement]:
    """Every kind of item a batch can hold, on fresh runs."""
    completed = factories.parked_run(launch=PERFORMANCE_LAUNCH)
    retried = factories.parked_run()
    cancelled = factories.parked_run()
    lifecycle.cancel_run(cancelled.run_id)
    wrong_lease = factories.parked_run()
    failed = factories.parked_run(max_attempts=1)
    settled_before = factories.parked_run()
    settlement.settle_attempt(settled_before.run_id, 1, settled_before.lease_token, factories.completed_result())
    return [
        settlement.Settlement(completed.run_id, 1, completed.lease_token, factories.completed_result({"a": 1}, stats=STATS),
                            progress_events=[{"step": 1}, {"step": 2}]),
        settlement.Settlement(retried.run_id, 1, retried.lease_token, factories.failed_result("runner_lost")),
        settlement.Settlement(cancelled.run_id, 1, cancelled.lease_token, factories.failed_result("cancelled")),
        settlement.Settlement(wrong_lease.run_id, 1, "not-the-lease", factories.completed_result()),
        settlement.Settlement("run-that-does-not-exist", 1, "lease", factories.completed_result()),
        settlement.Settlement(failed.run_id, 1, failed.lease_token, factories.failed_result("play_error")),
        settlement.Settlement(settled_before.run_id, 1, settled_before.lease_token, factories.completed_result({"b": 2})),
    ]


def _outcome(items: list[settlement.Settlement], answers: list[settlement.Settled]) -> list[tuple]:
    """What each item left behind, without its run's generated ids."""
    rows = []
    for index, (item, answer) in enumerate(zip(items, answers)):
        facts = factories.query(
            "SELECT event_type, payload_json - 'runId' FROM outbox WHERE run_id = %s "
            "AND event_type NOT IN ('run.created', 'run.started', 'run.waiting') ORDER BY created_at", [item.run_id])
        state = factories.query(
            "SELECT run.status, attempt.status, attempt.runner_result_json IS NOT NULL, "
            "(SELECT count(*) FROM compute_billing_jobs_v2 AS job WHERE job.run_id = run.run_id), "
            "(SELECT count(*) FROM sandbox_cleanup_jobs_v2 AS job WHERE job.run_id = run.run_id) "
            "FROM runs AS run JOIN attempts AS attempt ON attempt.run_id = run.run_id AND attempt.attempt = 1 "
            "WHERE run.run_id = %s", [item.run_id])
        rows.append((index, {key: value for key, value in dataclasses.asdict(answer).items() if key != "run_id"}, facts, state))
    return rows


def test_a_batch__each_item_settles_as_it_would_alone():
    batch = _scenarios()
    together = _outcome(batch, settlement.settle_attempts(batch))
    # The retried run is queued again; out of the way of the next scenarios' claims.
    lifecycle.cancel_run(batch[1].run_id)
    alone_items = _scenarios()
    alone = _outcome(alone_items, [settlement.settle_attempt(item.run_id, item.attempt, item.lease_token, item.result,
                                                           progress_events=item.progress_events)
                                   for item in alone_items])
    assert together == alone
    statuses = [answer["run_status"] for _, answer, _, _ in together]
    assert statuses == ["completed", "queued", "cancelled", None, None, "failed", None]


def test_a_batch__answers_follow_the_input_order_not_the_lock_order():
    parked = [factories.parked_run() for _ in range(5)]
    items = [settlement.Settlement(p.run_id, 1, p.lease_token, factories.completed_result()) for p in reversed(parked)]
    answers = settlement.settle_attempts(items)
    assert [answer.run_id for answer in answers] == [item.run_id for item in items]


def test_a_batch__naming_a_run_twice_is_refused_and_writes_nothing():
    parked = factories.parked_run()
    item = settlement.Settlement(parked.run_id, 1, parked.lease_token, factories.completed_result())
    before = factories.table_state()
    with pytest.raises(settlement.InvalidInput, match="once"):
        settlement.settle_attempts([item, item])
    assert factories.table_state() == before


def test_swept_losses_settled_in_one_batch__each_fenced_on_its_own_heartbeat_identity():
    """The sweep records each loss fenced on the heartbeat it saw, then settles what was recorded in one batch."""
    never_beat, moved_on = factories.parked_run(), factories.parked_run()
    beats.heartbeat(moved_on.run_id, 1, moved_on.lease_token)
    for parked in (never_beat, moved_on):
        liveness.record_runner_loss(parked.run_id, 1, parked.lease_token, None,
                                    factories.failed_result("runner_lost", verdict="runner_lost"))
    answers = settlement.settle_attempts([settlement.Settlement(p.run_id, 1, p.lease_token) for p in (never_beat, moved_on)])
    assert [(a.recorded, a.run_status) for a in answers] == [(True, "queued"), (False, None)]
    assert factories.one("SELECT status FROM runs WHERE run_id = %s", [moved_on.run_id]) == "waiting"


@pytest.mark.requirement("TRM-4")
def test_a_null_lease_token__never_passes_the_lease_fence__nothing_recorded_or_settled():
    """TRM-4: the statement itself refuses a null lease, not only the API in front of it."""
    parked = factories.parked_run()
    before = factories.table_state()
    [answer] = settlement.settle_attempts([settlement.Settlement(parked.run_id, 1, None, factories.completed_result())])
    assert (answer.attempt_exists, answer.lease_matches, answer.recorded, answer.run_status) == (True, False, False, None)
    assert factories.table_state() == before
