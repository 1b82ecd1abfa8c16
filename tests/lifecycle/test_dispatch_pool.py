"""RUN-2/RUN-3 at the queue's pace: sandbox starts run concurrently; a dispatcher claims only free start slots."""

import threading

import pytest

from scheduler.runs import dispatch
from tests import factories
from tests.factories import one

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
