"""Many heartbeats in one statement: each fenced on its own, and a web process's beats share one statement."""

import json

import pytest
from django.test import Client

from scheduler.errors import InvalidInput
from scheduler.runs import beats, lifecycle, settlement
from scheduler.runs.tokens import mint_runner_token
from tests import factories
from tests.concurrency import threads

pytestmark = pytest.mark.django_db(transaction=True)


def _beat_times(run_ids: list[str]) -> dict[str, object]:
    rows = factories.query("SELECT run_id, heartbeat_at FROM attempts WHERE attempt = 1 AND run_id = ANY (%s)",
                           [run_ids])
    return dict(rows)


@pytest.mark.requirement("RUN-4")
def test_a_batch_with_stale_items__bumps_the_current_ones_and_refuses_each_stale_one():
    current, cancelled, stale_lease, settled = (factories.parked_run() for _ in range(4))
    lifecycle.cancel_run(cancelled.run_id)
    settlement.settle_attempt(settled.run_id, 1, settled.lease_token, factories.completed_result())
    batch = [beats.Beat(current.run_id, 1, current.lease_token), beats.Beat(stale_lease.run_id, 1, "not-the-lease"),
             beats.Beat("run-that-does-not-exist", 1, "lease"), beats.Beat(settled.run_id, 1, settled.lease_token),
             beats.Beat(cancelled.run_id, 1, cancelled.lease_token)]
    before = _beat_times([item.run_id for item in batch])

    answers = beats.heartbeat_all(batch)

    assert [(answer.current, answer.cancel_requested) for answer in answers] == \
        [(True, False), (False, False), (False, False), (False, False), (True, True)]
    assert answers[0].heartbeat_identity and answers[4].heartbeat_identity
    assert [answer.heartbeat_identity for answer in answers[1:4]] == [None, None, None]
    after = _beat_times([item.run_id for item in batch])
    assert all(after[run_id] is not None and after[run_id] != before[run_id]
               for run_id in (current.run_id, cancelled.run_id))
    assert after[stale_lease.run_id] == before[stale_lease.run_id]
    assert after[settled.run_id] == before[settled.run_id]


@pytest.mark.requirement("RUN-4")
def test_a_batch_answers_as_each_beat_alone_would():
    parked = [factories.parked_run() for _ in range(3)]
    alone = [beats.heartbeat(item.run_id, 1, item.lease_token) for item in parked]
    together = beats.heartbeat_all([beats.Beat(item.run_id, 1, item.lease_token) for item in parked])
    assert [(beat.current, beat.cancel_requested) for beat in together] == \
        [(beat.current, beat.cancel_requested) for beat in alone]
    assert all(later.heartbeat_identity > earlier.heartbeat_identity for earlier, later in zip(alone, together))


def test_a_batch_naming_a_run_twice__is_refused_before_any_statement():
    parked = factories.parked_run()
    with pytest.raises(InvalidInput):
        beats.heartbeat_all([beats.Beat(parked.run_id, 1, parked.lease_token)] * 2)


@pytest.mark.requirement("RUN-4")
def test_batches_over_the_same_runs_in_opposite_orders__both_answer_without_a_deadlock():
    parked = [factories.parked_run() for _ in range(6)]
    forward = [beats.Beat(item.run_id, 1, item.lease_token) for item in parked]
    outcomes = threads.run_together(lambda: beats.heartbeat_all(forward),
                                    lambda: beats.heartbeat_all(list(reversed(forward))))
    assert all(beat.current for outcome in outcomes for beat in outcome.get())


def _post_heartbeat(parked):
    body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token}
    token = mint_runner_token(parked.run_id, 1, parked.lease_token)
    response = Client().post("/internal/runner/heartbeat", data=json.dumps(body), content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, response.json()["current"]


@pytest.mark.requirement("RUN-4")
def test_concurrent_heartbeats__each_answered_through_the_shared_heartbeater():
    parked = [factories.parked_run() for _ in range(8)]
    heartbeater = beats.shared_heartbeater()
    assert _post_heartbeat(parked[0]) == (200, True)
    assert heartbeater.statements == 0  # alone, nothing of the group's in flight: on the request's thread
    assert heartbeater._claim_idle()  # another beat in flight: every one of these is handed to the group
    try:
        outcomes = threads.run_together(*[lambda p=p: _post_heartbeat(p) for p in parked])
    finally:
        heartbeater._landed(1)
    assert [outcome.get() for outcome in outcomes] == [(200, True)] * 8
    assert 1 <= heartbeater.statements <= 8


def test_batch_size_one__beats_on_the_request_thread(settings):
    settings.SCHEDULER_HEARTBEAT_BATCH_SIZE = 1
    assert _post_heartbeat(factories.parked_run()) == (200, True)
    assert not beats._process.started
