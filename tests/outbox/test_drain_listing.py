"""Batch was full, go again: a drain tick lists again only when its listing was full (OBX-6 continuation aside)."""

import pytest

from scheduler.outbox import claims, drainer
from tests.factories import query
from tests.outbox.factories import backlog_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listings(monkeypatch):
    """How many times a tick read the ready runs (the real statement runs; only the calls are counted)."""
    calls = []
    real = claims.list_ready_runs

    def counted(*args, **kwargs):
        rows = real(*args, **kwargs)
        calls.append(len(rows))
        return rows

    monkeypatch.setattr(claims, "list_ready_runs", counted)
    return calls


def test_a_short_listing__is_read_once__and_the_loop_does_not_go_again(listings):
    for number in range(3):
        backlog_run(f"run-short-{number}", facts=3)
    tick = drainer.run_once("owner")
    assert tick.counts["delivered"] == 9
    assert listings == [3]  # everything ready was in the one listing: no second read to find nothing
    assert tick.as_tick().again is False


def test_a_full_listing__is_read_again_until_one_is_short(listings, monkeypatch):
    monkeypatch.setattr(drainer, "CANDIDATES", 2)
    for number in range(3):
        backlog_run(f"run-full-{number}", facts=3)
    tick = drainer.run_once("owner")
    assert tick.counts["delivered"] == 9
    assert listings == [2, 1]  # the first listing was full: more could be (and was) behind it
    assert tick.as_tick().again is False
    assert query("SELECT count(*) FROM outbox WHERE delivered_at IS NULL")[0][0] == 0


def test_a_tick_that_ran_out_of_batch__goes_again(listings):
    for number in range(3):
        backlog_run(f"run-batch-{number}", facts=3)
    tick = drainer.run_once("owner", batch=2)
    assert tick.counts["claimed"] == 2 and listings == [3]
    assert tick.as_tick().again is True


def test_runs_drained_since_the_listing__are_passed_over__and_its_later_runs_delivered_in_the_same_tick(monkeypatch):
    """A listing is a snapshot: another drainer may deliver its first runs before this one locks them. Those are
    locked, found empty and dropped; without that they were locked again first and the tick ended early."""
    stale = [f"run-stale-{number:02d}" for number in range(20)]
    fresh = [f"run-fresh-{number}" for number in range(3)]
    for number, run_id in enumerate(stale + fresh):
        backlog_run(run_id, facts=2, start_second=number)
    real = claims.list_ready_runs

    def snapshot_then_drained(*args, **kwargs):
        rows = real(*args, **kwargs)
        # What another drainer did between this listing and the claims: it delivered the first 20 runs.
        query("UPDATE outbox SET delivered_at = now() WHERE run_id LIKE 'run-stale-%%'")
        return rows

    monkeypatch.setattr(claims, "list_ready_runs", snapshot_then_drained)
    tick = drainer.run_once("owner")
    assert tick.counts["delivered"] == 6
    assert query("SELECT count(*) FROM outbox WHERE delivered_at IS NULL")[0][0] == 0
