"""RUN-3 in groups: a dispatcher's start threads park through one statement, each item fenced on its own."""

from __future__ import annotations

import logging

import psycopg
import pytest

from scheduler.runs import lifecycle
from scheduler.runs.batcher import StatementBatcher
from tests import factories
from tests.concurrency import threads

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(**launch_overrides) -> lifecycle.Claim:
    return factories.claim(factories.launch(**launch_overrides))


def park_item(claim: lifecycle.Claim, lease_token: str | None = None) -> lifecycle.Park:
    ref = {"provider": "local", "sandboxId": f"sb-{claim.run_id}", "routingDomain": None}
    return lifecycle.Park(claim.run_id, claim.attempt, lease_token or claim.lease_token, ref, 30_000, 1_700_000_000_000,
                          {**ref, "billingStartedAt": 1_700_000_000_000, "cpu": 1, "memoryMb": 512})


@pytest.fixture
def parker():
    batcher = StatementBatcher(lifecycle.park_all, max_batch=8, name="test-parker")
    yield batcher
    batcher.close()


def park_behind_a_held_run(parker: StatementBatcher, items: list[lifecycle.Park]) -> list[threads.Outcome]:
    """Block the parker on a first run's lock, queue `items` from their own threads together, then let go."""
    blocker = claimed()
    first, outcomes = threads.queue_behind_a_held_run(parker, blocker.run_id, park_item(blocker), items)
    assert first.get() is True
    return outcomes


@pytest.mark.requirement("RUN-3")
def test_parks_queued_together_share_one_statement_and_each_is_fenced_on_its_own(parker):
    good = [claimed() for _ in range(3)]
    wrong_lease = claimed()
    superseded = claimed()
    factories.query("UPDATE runtime_scheduler.runs SET status = 'queued' WHERE run_id = %s", [superseded.run_id])
    newer = factories.claim(superseded.run_id)  # attempt 2 claimed (attempt 1 retired): 1 may no longer park
    items = [park_item(claim) for claim in good] + [park_item(wrong_lease, "not-the-lease"), park_item(superseded)]
    answers = [outcome.get() for outcome in park_behind_a_held_run(parker, items)]
    assert answers == [True, True, True, False, False]
    assert parker.statements == 2  # the held run's, then one for the five queued together
    status = dict(factories.query("SELECT run_id, status FROM runtime_scheduler.runs"))
    assert [status[claim.run_id] for claim in good] == ["waiting"] * 3
    assert status[wrong_lease.run_id] == "running" and status[newer.run_id] == "running"
    facts = [run_id for (run_id,) in factories.query(
        "SELECT run_id FROM runtime_scheduler.outbox WHERE event_type = 'run.waiting'")]
    assert len(facts) == len(set(facts)) == 4  # the held run's and the three good ones, once each
    assert {claim.run_id for claim in good} <= set(facts)
    assert wrong_lease.run_id not in facts and superseded.run_id not in facts


def test_a_failing_park__its_neighbours_still_park_and_only_its_caller_sees_the_error(parker, caplog):
    good = claimed()
    bad = lifecycle.Park("run-with-an-impossible-attempt", 2**40, "lease", {"provider": "local", "sandboxId": "x"},
                         30_000, 1_700_000_000_000)
    with caplog.at_level(logging.WARNING, logger="scheduler.runs.batcher"):
        first, failing = park_behind_a_held_run(parker, [park_item(good), bad])
        assert first.get() is True
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            failing.get()
    assert factories.one("SELECT status FROM runtime_scheduler.runs WHERE run_id = %s", [good.run_id]) == "waiting"
    # The failed batch is told in one line naming the error and its statement, no traceback: a database restart
    # fails every batch in flight at once, and the caller gets the item's own error.
    [record] = [record for record in caplog.records if "items failed" in record.getMessage()]
    assert record.exc_info is None
    assert "NumericValueOutOfRange" in record.getMessage() and "in SQL statement runs_park" in record.getMessage()


def test_a_batch_names_each_run_once():
    claim = claimed()
    with pytest.raises(Exception, match="names each run once"):
        lifecycle.park_all([park_item(claim), park_item(claim)])
