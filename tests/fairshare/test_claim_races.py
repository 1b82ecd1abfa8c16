"""FSH-1, FSH-2, FSH-6 under real concurrency: eight claimers on their own connections, released together by a
barrier, never take an org past its cap, a key past its limit or an org past its start rate; claimers of an
org without limits take different runs, none coming back empty while runs wait."""

import pytest

from scheduler.fairshare import limits
from scheduler.runs.lifecycle import Concurrency, claim_queued_runs
from tests import factories
from tests.concurrency.threads import run_together
from tests.factories import one, query

CLAIMERS = 8


def launch_many(count, **fields):
    for _ in range(count):
        factories.launch(org_id="org-a", **fields)


def claim_together(limit):
    outcomes = run_together(*[lambda: [claim.run_id for claim in claim_queued_runs(limit)]] * CLAIMERS)
    return [outcome.get() for outcome in outcomes]


def active():
    return one("SELECT count(*) FROM runs WHERE status IN ('running', 'waiting')")


@pytest.mark.django_db(transaction=True)
def test_fsh1__eight_claimers_at_once__the_org_holds_exactly_its_cap():
    limits.change("org-a", limits.LimitsChange(max_active=3), actor="test")
    launch_many(20)
    taken = sum(claim_together(2), [])
    assert len(taken) == len(set(taken)) == 3 == active()


@pytest.mark.django_db(transaction=True)
def test_fsh2__eight_claimers_at_once__a_key_holds_exactly_its_limit():
    launch_many(20, concurrency=Concurrency("customer-7", 2))
    taken = sum(claim_together(2), [])
    assert len(taken) == len(set(taken)) == 2 == active()


@pytest.mark.django_db(transaction=True)
def test_fsh6__eight_claimers_at_once__the_org_starts_exactly_its_rate():
    limits.change("org-a", limits.LimitsChange(max_starts_per_minute=4), actor="test")
    launch_many(20)
    taken = sum(claim_together(1), [])
    assert len(taken) == len(set(taken)) == 4 == one("SELECT count(*) FROM org_starts")


@pytest.mark.django_db(transaction=True)
def test_claimers_of_an_org_without_limits__take_different_runs__none_empty_handed():
    launch_many(CLAIMERS)
    taken = claim_together(1)
    assert all(len(mine) == 1 for mine in taken), taken
    assert len({run_id for mine in taken for run_id in mine}) == CLAIMERS
    assert query("SELECT count(*) FROM runs WHERE status = 'queued'") == [(0,)]
