"""A group statement gathers only while its items keep overlapping (runs/batcher.py, issue 47).

Driven with real heartbeats on real connections: overlap is made by holding an attempt's row so that items queue
behind the group's statement, never by sleeping. A gathering batch here would wait two minutes for more, so a test
whose batch did not close when its callers were all in it fails on its one-minute join instead.
"""

import threading

import pytest

from scheduler.runs import beats
from scheduler.runs.batcher import GATHER_FROM, GATHER_UNTIL, StatementBatcher
from tests import factories
from tests.concurrency import threads

pytestmark = pytest.mark.django_db(transaction=True)

BATCH = 3


def _beat(parked, lease_token: str | None = None) -> beats.Beat:
    return beats.Beat(parked.run_id, 1, lease_token or parked.lease_token)


def _submit(batcher: StatementBatcher, parked, ran_here: list) -> beats.Heartbeat:
    """A runner's beat as beats.beat sends it; `ran_here` notes each that ran on its caller's thread."""
    def here():
        ran_here.append(parked.run_id)
        return beats.heartbeat(parked.run_id, 1, parked.lease_token)

    return batcher.submit(_beat(parked), here=here)


def _overlap(batcher: StatementBatcher) -> None:
    """One statement blocked on a held attempt while BATCH items queue behind it: the next batch finds them
    waiting (a heartbeat locks its attempt, not its run)."""
    held = factories.parked_run()
    waiting = [factories.parked_run() for _ in range(BATCH)]
    first, rest = threads.queue_behind_a_held_run(batcher, held.run_id, _beat(held), [_beat(item) for item in waiting],
                                                  table="attempts")
    assert first.get().current and all(outcome.get().current for outcome in rest)


def _make_it_gather(batcher: StatementBatcher) -> None:
    """Two overlaps: the group gathers (with a short linger meanwhile, as the last batch gathers too)."""
    linger, batcher.linger = batcher.linger, 0.001
    _overlap(batcher)
    assert not batcher.gathering  # one overlap is not yet a load
    _overlap(batcher)
    assert batcher.gathering
    batcher.linger = linger


@pytest.fixture
def gatherer():
    batcher = StatementBatcher(beats.heartbeat_all, max_batch=32, name="test-gatherer", linger=120.0)
    yield batcher
    batcher.close()


def test_a_quiet_group_runs_each_lone_item_at_once_on_its_callers_thread(gatherer):
    parked = [factories.parked_run() for _ in range(5)]
    ran_here: list[str] = []

    answers = [_submit(gatherer, item, ran_here) for item in parked]

    assert all(answer.current for answer in answers)
    assert ran_here == [item.run_id for item in parked] and gatherer.statements == 0
    assert not gatherer.gathering and gatherer.overlap == pytest.approx(1.0)


@pytest.mark.requirement("RUN-4")
def test_items_that_keep_overlapping__gather_into_one_statement__each_still_fenced_on_its_own(gatherer):
    _make_it_gather(gatherer)
    first, *others, stale = (factories.parked_run() for _ in range(BATCH + 1))
    before = gatherer.statements
    ran_here: list[str] = []

    # A lone beat first: a quiet group would run it at once, on its own thread or the group's, in a statement
    # of its own; a gathering one holds it until as many callers as were lately in flight at once (BATCH + 1:
    # the blocked beat and those queued behind it) are in the batch, not for the whole linger.
    overlap = gatherer.overlap
    alone = threads.start(lambda: _submit(gatherer, first, ran_here))
    threads.wait_for(lambda: gatherer.overlap != overlap, "the group took the lone beat (and counted it)")
    barrier = threading.Barrier(BATCH)
    outcomes = [alone, *(threads.start(lambda item=item: _submit(gatherer, item, ran_here), barrier=barrier)
                         for item in others),
                threads.start(lambda: gatherer.submit(_beat(stale, "not-the-lease")), barrier=barrier)]
    for thread, _ in outcomes:
        thread.join(timeout=60)
        assert not thread.is_alive()

    answers = [outcome.get() for _, outcome in outcomes]
    assert ran_here == [] and gatherer.statements == before + 1
    assert [answer.current for answer in answers] == [True] * BATCH + [False]
    assert answers[-1].heartbeat_identity is None


def test_a_group_stops_gathering_once_its_items_arrive_alone_again(gatherer):
    _make_it_gather(gatherer)
    gatherer.linger = 0.001  # each lone item below may wait this long while the group still gathers
    ran_here: list[str] = []
    below_the_start: list[float] = []  # overlaps under GATHER_FROM the group still gathered at (hysteresis)
    for _ in range(40):
        _submit(gatherer, factories.parked_run(), ran_here)
        if not gatherer.gathering:
            break
        if gatherer.overlap < GATHER_FROM:
            below_the_start.append(gatherer.overlap)
    assert not gatherer.gathering and gatherer.overlap < GATHER_UNTIL
    assert below_the_start, "a load just under the line switched the group off at once"

    last = factories.parked_run()
    assert _submit(gatherer, last, ran_here).current
    assert ran_here[-1] == last.run_id


def test_a_group_with_no_linger_never_gathers():
    batcher = StatementBatcher(beats.heartbeat_all, max_batch=BATCH, name="test-no-linger", linger=0)
    try:
        for _ in range(3):
            _overlap(batcher)
        assert batcher.overlap > 1.2 and not batcher.gathering
    finally:
        batcher.close()
