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


@pytest.mark.requirement("FSH-1")
@pytest.mark.django_db(transaction=True)
def test_fsh1__eight_claimers_at_once__the_org_holds_exactly_its_cap():
    limits.change("org-a", limits.LimitsChange(max_active=3), actor="test")
    launch_many(20)
    taken = sum(claim_together(2), [])
    assert len(taken) == len(set(taken)) == 3 == active()


@pytest.mark.requirement("FSH-2")
@pytest.mark.django_db(transaction=True)
def test_fsh2__eight_claimers_at_once__a_key_holds_exactly_its_limit():
    launch_many(20, concurrency=Concurrency("customer-7", 2))
    taken = sum(claim_together(2), [])
    assert len(taken) == len(set(taken)) == 2 == active()


@pytest.mark.requirement("FSH-6")
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


def claim_two_held_inside_the_claim(limit: int, **launch_fields) -> list[str]:
    """Two claimers of org-a with the second's view of the queue made different from the first's. The first is held
    inside its claim statement (its runs locked, not yet committed) by a row lock the test owns on org-a's turn;
    then a higher-priority run of org-a is launched; then the second claims. Without the org lock the second's
    snapshot still counts nothing active and its first pick is the new run, which nobody holds: the org ends one
    past its limit, every time. With the lock the second waits for the first to commit and counts its runs. A
    barrier on lock waits, never on time. org-b keeps a second org in the turn (so the claim keeps turns)."""
    from django.db import connection

    from tests.concurrency.threads import start, wait_for, wait_until_blocked
    from tests.support import connect

    for _ in range(4):
        factories.launch(org_id="org-b")
    query("INSERT INTO org_claim_turns (org_id, last_claimed_at, virtual_pass) VALUES ('org-a', now(), 0)")

    def claim():
        return [claim.run_id for claim in claim_queued_runs(limit)]

    with connect(connection.settings_dict["NAME"]) as holder:
        holder.execute("SELECT 1 FROM runtime_scheduler.org_claim_turns WHERE org_id = 'org-a' FOR UPDATE")
        first = start(claim, application_name="claimer-1")
        wait_until_blocked("claimer-1")
        factories.launch(org_id="org-a", priority=10, **launch_fields)
        second = start(claim, application_name="claimer-2")
        wait_for(lambda: blocked("claimer-2") or not second[0].is_alive(), "the second claim waiting or done")
        holder.rollback()
    for thread, _ in (first, second):
        thread.join(timeout=60)
        assert not thread.is_alive(), "a claim never finished"
    taken = [run_id for _, outcome in (first, second) for run_id in outcome.get()]
    return [run_id for run_id in taken if one("SELECT org_id FROM runs WHERE run_id = %s", [run_id]) == "org-a"]


def blocked(application_name: str) -> bool:
    return one("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
               [application_name]) > 0


def active_of_org_a():
    return one("SELECT count(*) FROM runs WHERE org_id = 'org-a' AND status IN ('running', 'waiting')")


@pytest.mark.requirement("FSH-1")
@pytest.mark.django_db(transaction=True)
def test_fsh1__a_claim_held_inside_its_statement__the_other_waits_for_the_org_and_the_cap_holds():
    limits.change("org-a", limits.LimitsChange(max_active=3), actor="test")
    launch_many(10)
    taken = claim_two_held_inside_the_claim(8)
    assert len(taken) == len(set(taken)) == 3 == active_of_org_a()


@pytest.mark.requirement("FSH-2")
@pytest.mark.django_db(transaction=True)
def test_fsh2__a_claim_held_inside_its_statement__the_other_waits_for_the_org_and_the_key_holds():
    launch_many(10, concurrency=Concurrency("customer-7", 3))
    taken = claim_two_held_inside_the_claim(8, concurrency=Concurrency("customer-7", 3))
    assert len(taken) == len(set(taken)) == 3 == active_of_org_a()


@pytest.mark.requirement("FSH-6")
@pytest.mark.django_db(transaction=True)
def test_fsh6__a_claim_held_inside_its_statement__the_other_waits_for_the_org_and_the_rate_holds():
    limits.change("org-a", limits.LimitsChange(max_starts_per_minute=3), actor="test")
    launch_many(10)
    taken = claim_two_held_inside_the_claim(8)
    assert len(taken) == len(set(taken)) == 3 == one("SELECT count(*) FROM org_starts")
