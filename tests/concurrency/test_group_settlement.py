"""Group settlement: concurrent terminals share settle statements, each keeps its own answer and fences."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction

from scheduler.runs import settlement, settler
from tests import factories
from tests.concurrency import threads

pytestmark = pytest.mark.django_db(transaction=True)


def _submit_behind_a_held_run(group: settler.BatchSettler, items: list[settlement.Settlement]):
    """Block the settler on a first run's lock, queue `items` from their own threads together, then let go."""
    blocker = factories.parked_run()
    first, outcomes = threads.queue_behind_a_held_run(
        group, blocker.run_id, settlement.Settlement(blocker.run_id, 1, blocker.lease_token, factories.completed_result()),
        items)
    assert first.get().run_status == "completed"
    return outcomes


@pytest.fixture
def group():
    settler_ = settler.BatchSettler(max_batch=8)
    yield settler_
    settler_.close()


def test_concurrent_terminals__share_statements_and_each_gets_its_own_answer(group):
    parked = [factories.parked_run() for _ in range(16)]
    items = [settlement.Settlement(p.run_id, 1, p.lease_token, factories.completed_result({"n": i}))
             for i, p in enumerate(parked)]
    outcomes = _submit_behind_a_held_run(group, items)
    answers = [outcome.get() for outcome in outcomes]
    assert [(a.run_id, a.run_status, a.is_this_result) for a in answers] == \
        [(p.run_id, "completed", True) for p in parked]
    # One statement for the held run, then two of eight for the sixteen queued together.
    assert group.statements == 3
    outputs = dict(factories.query(
        "SELECT run_id, payload_json -> 'output' ->> 'n' FROM runtime_scheduler.outbox WHERE event_type = 'run.completed'"))
    assert [outputs[p.run_id] for p in parked] == [str(i) for i in range(16)]


def test_a_failing_item__its_neighbours_still_settle_and_only_its_caller_sees_the_error(group):
    good = [factories.parked_run() for _ in range(2)]
    items = [settlement.Settlement(good[0].run_id, 1, good[0].lease_token, factories.completed_result()),
             settlement.Settlement("run-with-an-impossible-attempt", 2**40, "lease", factories.completed_result()),
             settlement.Settlement(good[1].run_id, 1, "not-the-lease", factories.completed_result())]
    first, bad, wrong_lease = _submit_behind_a_held_run(group, items)
    assert first.get().run_status == "completed"
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        bad.get()
    assert wrong_lease.get().lease_matches is False
    assert factories.one("SELECT status FROM runtime_scheduler.runs WHERE run_id = %s", [good[1].run_id]) == "waiting"


def test_a_caller_inside_a_transaction__settles_on_its_own_connection_and_rolls_back_with_it():
    parked = factories.parked_run()
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            answer = settler.settle(settlement.Settlement(parked.run_id, 1, parked.lease_token, factories.completed_result()))
            assert answer.run_status == "completed"
            raise RuntimeError("the caller's work fails")
    assert factories.one("SELECT status FROM runtime_scheduler.runs WHERE run_id = %s", [parked.run_id]) == "waiting"


def test_the_same_run_twice_in_one_queue__settles_once_in_separate_statements(group):
    parked = factories.parked_run()
    items = [settlement.Settlement(parked.run_id, 1, parked.lease_token, factories.completed_result({"n": n}))
             for n in range(2)]
    outcomes = _submit_behind_a_held_run(group, items)
    answers = [outcome.get() for outcome in outcomes]
    assert sorted(a.run_status is not None for a in answers) == [False, True]
    assert group.statements == 3


def test_close__settles_what_is_queued_then_refuses():
    group = settler.BatchSettler(max_batch=8)
    parked = factories.parked_run()
    assert group.settle(settlement.Settlement(parked.run_id, 1, parked.lease_token,
                                            factories.completed_result())).run_status == "completed"
    group.close()
    assert not group._thread.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        group.settle(settlement.Settlement(parked.run_id, 1, parked.lease_token, factories.completed_result()))


def test_two_batches_over_the_same_runs_in_opposite_orders__no_deadlock_and_one_verdict_each():
    for _ in range(10):
        parked = [factories.parked_run(max_attempts=1) for _ in range(20)]
        # Different companions make the two batches' sets (and any hash order over them) differ.
        companions = [factories.parked_run(max_attempts=1) for _ in range(40)]
        forward = [settlement.Settlement(p.run_id, 1, p.lease_token, factories.completed_result({"by": "forward"}))
                   for p in parked + companions[:20]]
        backward = [settlement.Settlement(p.run_id, 1, p.lease_token, factories.failed_result("runner_lost"))
                    for p in list(reversed(parked)) + companions[20:]]
        first, second = threads.run_together(lambda: settlement.settle_attempts(forward),
                                             lambda: settlement.settle_attempts(backward))
        answers = first.get() + second.get()  # a deadlock would raise here
        for p in parked:
            settled = [answer for answer in answers if answer.run_id == p.run_id and answer.run_status]
            assert len(settled) == 1, settled
        assert factories.one("SELECT count(*) FROM runtime_scheduler.outbox WHERE run_id = ANY(%s) "
                             "AND event_type IN ('run.completed', 'run.failed')",
                             [[p.run_id for p in parked]]) == 20


def test_the_settlers_connection_dies__the_next_batch_reconnects_and_every_item_settles(group):
    first = factories.parked_run()
    assert group.settle(settlement.Settlement(first.run_id, 1, first.lease_token,
                                            factories.completed_result())).run_status == "completed"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                       " WHERE pid <> pg_backend_pid() AND query LIKE %s", ["%unnest(%"])
        assert cursor.fetchall(), "the settler's backend was found"
    parked = [factories.parked_run() for _ in range(2)]
    answers = [group.settle(settlement.Settlement(p.run_id, 1, p.lease_token, factories.completed_result()))
               for p in parked]
    assert [answer.run_status for answer in answers] == ["completed", "completed"]
