"""RUN-2: the sole claim (runs_claim_queued_sole), for one uncounted org alone in the queue, takes what the full free
claim takes and answers as it does; for any other queue it claims nothing and says so, and the full claim runs."""

import datetime as dt

import pytest
from django.db import transaction

from scheduler import db
from scheduler.fairshare import limits
from scheduler.runs import claiming
from scheduler.runs.lifecycle import Concurrency, claim_queued_runs
from tests import factories
from tests.factories import query

PARAMS = {"lease_seconds": 60.0, "default_max_active": None}


def launch(org="org-a", **fields) -> str:
    run_id = factories.launch(org_id=org, **fields)
    query("UPDATE runs SET created_at = clock_timestamp() WHERE run_id = %s", [run_id])
    return run_id


def answer(name: str, limit: int) -> tuple[list[str], tuple]:
    """(claimed run ids in order, (open_orgs, chosen_orgs, counted_orgs)) of one claim statement, rolled back."""
    with transaction.atomic():
        rows = db.fetch_all(name, {"limit": limit, **PARAMS})
        transaction.set_rollback(True)
    meta = rows.pop()
    return [row["run_id"] for row in rows], (meta["open_orgs"], meta["chosen_orgs"], meta["counted_orgs"] or [])


@pytest.mark.requirement("RUN-2")
@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 3, 10])
def test_sole_claim__one_uncounted_org__takes_what_the_full_claim_takes(limit):
    low = launch(priority=-1)
    first, second = launch(), launch()
    high = launch(priority=5)
    launch(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))  # not yet due
    limits.change("org-a", limits.LimitsChange(weight=3), actor="test")  # a weight alone counts nothing
    full = answer("runs_claim_queued_free", limit)
    assert full[1] == (1, 1, [])
    assert answer("runs_claim_queued_sole", limit) == full
    assert full[0] == sorted([high, first, second, low][:limit])  # priority then age; answered in run_id order


@pytest.mark.requirement("RUN-2")
@pytest.mark.django_db
def test_sole_claim__an_empty_queue_or_a_paused_org_alone__nothing_open_as_the_full_claim_says():
    assert answer("runs_claim_queued_sole", 4) == answer("runs_claim_queued_free", 4) == ([], (0, 0, []))
    launch()
    limits.change("org-a", limits.LimitsChange(paused=True), actor="test")
    assert answer("runs_claim_queued_sole", 4) == answer("runs_claim_queued_free", 4) == ([], (0, 0, []))


SHAPES = {
    "two orgs": lambda: launch("org-b"),
    "a cap": lambda: limits.change("org-a", limits.LimitsChange(max_active=5), actor="test"),
    "a start rate": lambda: limits.change("org-a", limits.LimitsChange(max_starts_per_minute=5), actor="test"),
    "a keyed run queued": lambda: launch(concurrency=Concurrency("customer-7", 1)),
    "a paused org before another": lambda: (launch("org-b"),
                                             limits.change("org-a", limits.LimitsChange(paused=True), actor="test")),
}


@pytest.mark.requirement("RUN-2")
@pytest.mark.django_db
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_sole_claim__a_queue_it_does_not_serve__claims_nothing_and_says_so(shape):
    launch()
    SHAPES[shape]()
    claimed, (open_orgs, _, _) = answer("runs_claim_queued_sole", 4)
    assert claimed == [] and open_orgs is None
    assert query("SELECT count(*) FROM attempts") == [(0,)]


def claim_statements(monkeypatch) -> list[str]:
    """The names of the claim statements run from now on (each still runs), with the sole claim's turn to be
    tried."""
    ran: list[str] = []
    fetch_all = db.fetch_all

    def recorded(name, *args, **kwargs):
        if name.startswith("runs_claim"):
            ran.append(name)
        return fetch_all(name, *args, **kwargs)

    monkeypatch.setattr(db, "fetch_all", recorded)
    monkeypatch.setattr(claiming._QueueShape, "sole", True)
    return ran


@pytest.mark.requirement("RUN-2")
@pytest.mark.django_db
def test_claim__the_full_claim_after_a_refusal__the_sole_claim_again_once_one_uncounted_org_is_left(monkeypatch):
    a, b = launch(), launch("org-b")
    ran = claim_statements(monkeypatch)
    assert [claim.run_id for claim in claim_queued_runs(1)] == [a]
    assert ran == ["runs_claim_queued_sole", "runs_claim_queued_free"]
    ran.clear()
    # The full claim saw two orgs: the next claim does not try the sole one, and sees one org left.
    assert [claim.run_id for claim in claim_queued_runs(1)] == [b]
    assert ran == ["runs_claim_queued_free"]
    ran.clear()
    c = launch("org-b")
    assert [claim.run_id for claim in claim_queued_runs(1)] == [c]
    assert ran == ["runs_claim_queued_sole"]


@pytest.mark.requirement("RUN-2")
@pytest.mark.django_db
def test_claim__a_default_cap__never_the_sole_claim(monkeypatch):
    from scheduler.conf import scheduler_settings

    run_id = launch()
    ran = claim_statements(monkeypatch)
    monkeypatch.setattr(type(scheduler_settings), "org_max_active", property(lambda self: 5))
    assert [claim.run_id for claim in claim_queued_runs(1)] == [run_id]
    assert "runs_claim_queued_sole" not in ran
