"""Issue 47: leasing a fact for delivery (and returning its lease) writes no index entry: a HOT update."""

import pytest

from scheduler.outbox import settle
from tests.factories import one, query
from tests.outbox.factories import backlog_run, claim_one

pytestmark = pytest.mark.django_db


def _updates() -> tuple[int, int]:
    """This transaction's updates of outbox rows so far, and how many of them were HOT."""
    return (one("SELECT pg_stat_get_xact_tuples_updated('outbox'::regclass)"),
            one("SELECT pg_stat_get_xact_tuples_hot_updated('outbox'::regclass)"))


def _pages(run_id: str) -> dict[str, int]:
    """Which heap page holds each of the run's facts now."""
    return dict(query("SELECT event_id, (ctid::text::point)[0]::int FROM outbox WHERE run_id = %s", [run_id]))


def _stayed(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(1 for event_id, page in after.items() if before[event_id] == page)


@pytest.mark.requirement("OBX-5")
def test_a_lease_taken_and_returned__is_a_hot_update_of_each_fact():
    # An update is HOT when no indexed column changes and the new version fits on its page; a page left full
    # by earlier tests' rolled-back rows sends a version elsewhere, so the test counts the versions that
    # stayed on their page: each of those is HOT only if the lease touches no indexed column.
    backlog_run("run-hot", facts=5)
    updated, hot = _updates()
    inserted = _pages("run-hot")
    prefix = claim_one("ledger", "owner-a")
    leased = _pages("run-hot")
    assert _updates() == (updated + 5, hot + _stayed(inserted, leased))
    assert settle.release(prefix.lease_owner, prefix.fact_ids) == 5
    returned = _pages("run-hot")
    assert _updates() == (updated + 10, hot + _stayed(inserted, leased) + _stayed(leased, returned))
    assert _stayed(inserted, leased) + _stayed(leased, returned) > 0, "no version stayed on its page: nothing judged"
