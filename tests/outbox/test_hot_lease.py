"""Issue 47: leasing a fact for delivery (and returning its lease) writes no index entry: a HOT update."""

import pytest

from scheduler.outbox import settle
from tests.factories import one
from tests.outbox.factories import backlog_run, claim_one

pytestmark = pytest.mark.django_db


def _updates() -> tuple[int, int]:
    """This transaction's updates of outbox rows so far, and how many of them were HOT."""
    return (one("SELECT pg_stat_get_xact_tuples_updated('outbox'::regclass)"),
            one("SELECT pg_stat_get_xact_tuples_hot_updated('outbox'::regclass)"))


@pytest.mark.requirement("OBX-5")
def test_a_lease_taken_and_returned__is_a_hot_update_of_each_fact():
    backlog_run("run-hot", facts=5)
    updated, hot = _updates()
    prefix = claim_one("ledger", "owner-a")
    assert _updates() == (updated + 5, hot + 5)
    assert settle.release(prefix.lease_owner, prefix.fact_ids) == 5
    assert _updates() == (updated + 10, hot + 10)
