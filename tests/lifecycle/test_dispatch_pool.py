"""RUN-2/RUN-3 at the queue's pace: sandbox starts run concurrently; a dispatcher claims only free start slots."""

import threading

import pytest

from scheduler.runs import dispatch
from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db(transaction=True)


def launch(count: int) -> list[str]:
    return [factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"}) for _ in range(count)]


def test_four_starts_in_flight_at_once(daytona):
    """Each sandbox create waits until all four are in flight: one start after another could never get there."""
    daytona.create_gate = threading.Barrier(4, timeout=60).wait
    launch(4)
    tick = dispatch.run_once(4, max_starts=4)
    assert tick.counts == {**tick.counts, "claimed": 4, "parked": 4, "start_failed": 0}
    assert one("SELECT count(*) FROM runs WHERE status = 'waiting'") == 4


def test_claims_only_as_many_runs_as_it_has_free_start_slots(daytona):
    release = threading.Event()
    daytona.create_gate = lambda: release.wait(60)
    launch(5)
    pool = dispatch.DispatchPool(2)
    try:
        assert pool.tick(10).counts["claimed"] == 2
        full = pool.tick(10, slot_wait=0.01)
        assert full.counts["claimed"] == 0 and full.again  # waits for a slot, claims nothing meanwhile
        assert one("SELECT count(*) FROM attempts") == 2
    finally:
        release.set()
        finished = pool.close()
    assert finished["parked"] == 2
    assert one("SELECT count(*) FROM runs WHERE status = 'queued'") == 3


def test_a_start_that_raises_in_its_thread_frees_its_slot(daytona, monkeypatch):
    launch(1)
    monkeypatch.setattr(dispatch, "dispatch_claim", lambda claim, result: 1 / 0)
    pool = dispatch.DispatchPool(1)
    pool.tick(1)
    pool.close()
    assert pool._in_flight == 0  # the claim lease expires and the sweep recovers the run (RUN-9)


def test_a_start_thread_whose_connection_broke_reconnects_for_its_next_start(daytona):
    """A database restart breaks every start thread's connection: the start that finds it broken fails (its claim
    lease recovers it), and the thread's next start parks on a new connection."""
    pool = dispatch.DispatchPool(1)
    try:
        for number in range(3):
            run_id = launch(1)[0]
            if number == 1:  # what a restart does to the start thread's connection (this one is kept)
                query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                      "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
            pool._slot_freed.clear()
            assert pool.tick(1).counts["claimed"] == 1
            assert pool._slot_freed.wait(30)
            status = one("SELECT status FROM runs WHERE run_id = %s", [run_id])
            assert status == ("running" if number == 1 else "waiting"), (number, status)
    finally:
        pool.close()
