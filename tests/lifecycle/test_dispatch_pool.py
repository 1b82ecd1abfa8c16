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


@pytest.mark.requirement("RUN-2")
def test_a_tick_that_claimed_anything_looks_again_and_one_that_found_nothing_waits(daytona):
    """Launches that come faster than a tick keep the dispatcher claiming without arming its wake signal."""
    launch(1)
    pool = dispatch.DispatchPool(4)
    try:
        partial = pool.tick(4)
        # One of the four it could take: look again, after the loop's cooldown (launches meanwhile share a claim).
        assert partial.counts["claimed"] == 1 and partial.again and partial.partial
        empty = pool.tick(4)
        assert empty.counts["claimed"] == 0 and not empty.again  # nothing queued: arm and wait
    finally:
        pool.close()
    launch(4)
    pool = dispatch.DispatchPool(4)
    try:
        full = pool.tick(4)
        assert full.counts["claimed"] == 4 and full.again and not full.partial  # a full claim: at once
    finally:
        pool.close()


@pytest.mark.requirement("RUN-2")
def test_a_claim_whose_runs_were_all_locked_looks_again_once_after_the_cooldown(daytona):
    """A drainer locks a just-launched run for a moment to deliver its run.created (OBX-5); the claim skips it
    (SKIP LOCKED). The dispatcher's wake was spent on that launch, so it looks again after its cooldown rather than
    wait for the next launch; once only, so a lock held long does not keep it looking."""
    from tests.support import connect

    run_id = launch(1)[0]
    pool = dispatch.DispatchPool(4)
    try:
        with connect(autocommit=False) as holder:
            holder.execute("SELECT 1 FROM runtime_scheduler.runs WHERE run_id = %s FOR NO KEY UPDATE", [run_id])
            skipped = pool.tick(4)
            assert skipped.counts["claimed"] == 0 and skipped.partial and not skipped.again
            still = pool.tick(4)
            assert still.counts["claimed"] == 0 and not still.partial  # once: then arm and wait, as when idle
            again = pool.tick(4)
            assert again.counts["claimed"] == 0 and again.partial  # a new skip after a plain look: once more
            holder.rollback()
        claimed = pool.tick(4)
        assert claimed.counts["claimed"] == 1
        assert pool.tick(4).partial is False  # nothing queued, nothing locked: no look again
    finally:
        pool.close()


def test_a_start_that_raises_in_its_thread_frees_its_slot(daytona, monkeypatch):
    launch(1)
    monkeypatch.setattr(dispatch, "dispatch_claim", lambda claim, result, park: 1 / 0)
    pool = dispatch.DispatchPool(1)
    pool.tick(1)
    pool.close()
    assert pool._in_flight == 0  # the claim lease expires and the sweep recovers the run (RUN-9)


def terminate_dispatcher_backends() -> None:
    """Terminate every other backend of this database on the real server (the test's own is kept): what a
    restart does to the dispatcher's connections, without taking the test's own server down."""
    query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
          "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")


def start_one(pool, daytona, *, fail: bool) -> str:
    """Launch one run and let the pool start it (a failed start, a 400 on create, settles it in its thread)."""
    run_id = factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"}, max_attempts=1)
    if fail:
        daytona.script("POST", 400, {"message": "refused"}, path_contains="/api/sandbox")
    pool._slot_freed.clear()
    assert pool.tick(1).counts["claimed"] == 1
    assert pool._slot_freed.wait(30)
    return one("SELECT status FROM runs WHERE run_id = %s", [run_id])


def test_parks_and_start_threads_reconnect_after_a_database_restart(daytona):
    """A database restart breaks every connection the dispatcher holds. The group parker runs the broken batch's
    parks again, one by one, on a new connection, so the start parks. A start thread's own statement (a failed
    start's settlement) finds its connection broken and fails (its claim lease recovers the run); the thread then
    closes that connection, so its next settlement reconnects."""
    pool = dispatch.DispatchPool(1)
    try:
        assert start_one(pool, daytona, fail=False) == "waiting"  # the parker's connection, open
        assert start_one(pool, daytona, fail=True) == "failed"  # the start thread's connection, open
        terminate_dispatcher_backends()
        assert start_one(pool, daytona, fail=False) == "waiting"
        assert start_one(pool, daytona, fail=True) == "running"
        assert start_one(pool, daytona, fail=True) == "failed"
    finally:
        pool.close()


def test_start_threads_park_through_the_pools_group_parker(daytona):
    """Four starts in flight at once all park, through the pool's parker (how many statements depends on when
    each start returns; tests/concurrency/test_group_park.py shows the sharing itself)."""
    daytona.create_gate = threading.Barrier(4, timeout=60).wait
    launch(4)
    pool = dispatch.DispatchPool(4)
    try:
        assert pool.tick(4).counts["claimed"] == 4
    finally:
        finished = pool.close()
    assert finished["parked"] == 4
    assert one("SELECT count(*) FROM runs WHERE status = 'waiting'") == 4
    assert 1 <= pool._parker.statements <= 4
