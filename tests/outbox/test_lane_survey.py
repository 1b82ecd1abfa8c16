"""OBX-2..4 (issue 47): the lane survey skips the listing only when no fact could head a ready run, so the
listing's answer is the same with the survey as without it; fuzzed over facts delivered, failed, backing off and
leased (live or expired), in both orders. The production statements throughout."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import db
from scheduler.kinds import HeadPriority, Lane
from scheduler.outbox import claims
from tests.factories import query
from tests.outbox.factories import backlog_run

pytestmark = pytest.mark.django_db
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

STATES = ("pending", "delivered", "failed", "backing_off", "leased", "lease_expired")
UPDATES = {
    "delivered": "delivered_at = now()",
    "failed": "failed_at = now()",
    "backing_off": "next_attempt_at = now() + interval '1 hour'",
    "leased": "lease_owner = 'another', lease_expires_at = now() + interval '1 hour'",
    "lease_expired": "lease_owner = 'another', lease_expires_at = now() - interval '1 second'",
}
KINDS = ("run.created", "run.progress", "run.waiting", "run.completed")
FACT = st.tuples(st.sampled_from(KINDS), st.sampled_from(STATES))


def _listing_alone(priority: HeadPriority) -> list[str]:
    """The listing statement as it would run without the survey (every class enumerated: each is small here)."""
    admission_first = priority is HeadPriority.ADMISSION_FIRST
    rows = db.fetch_all("outbox_list_ready_runs", {
        "lane": Lane.LEDGER, "admission_first": admission_first, "limit": 10, "exclude_run_ids": [],
        "enumerate_terminals": admission_first, "walk_terminals": False,
        "enumerate_waits": admission_first, "walk_waits": False})
    return [row["run_id"] for row in rows]


@FUZZ
@given(st.lists(st.lists(FACT, min_size=1, max_size=4), max_size=5))
@pytest.mark.requirement("OBX-4")
def test_the_survey_never_hides_a_ready_run(runs):
    query("TRUNCATE runs, outbox CASCADE")
    for index, facts in enumerate(runs):
        ids = backlog_run(f"run-{index}", kinds=[kind for kind, _ in facts], start_second=index)
        for event_id, (_, state) in zip(ids, facts):
            if state in UPDATES:
                query(f"UPDATE outbox SET {UPDATES[state]} WHERE event_id = %s", [event_id])
    for priority in HeadPriority:
        listed = [row["run_id"] for row in claims.list_ready_runs(Lane.LEDGER, priority, 10)]
        assert listed == _listing_alone(priority)


@pytest.mark.requirement("OBX-4")
def test_a_lane_where_no_fact_could_head_a_ready_run__is_not_listed(monkeypatch):
    ran: list[str] = []
    real = db.fetch_all
    monkeypatch.setattr(db, "fetch_all", lambda name, *args, **kwargs: ran.append(name) or real(name, *args, **kwargs))
    backlog_run("failed", kinds=["run.progress"], start_second=1)
    backlog_run("leased", kinds=["run.progress", "run.completed"], start_second=2)
    backlog_run("later", kinds=["run.progress"], start_second=3)
    query("UPDATE outbox SET failed_at = now() WHERE run_id = 'failed'")
    query("UPDATE outbox SET lease_owner = 'x', lease_expires_at = now() + interval '1 hour' WHERE run_id = 'leased'")
    query("UPDATE outbox SET next_attempt_at = now() + interval '1 hour' WHERE run_id = 'later'")

    assert claims.list_ready_runs(Lane.LEDGER, HeadPriority.ADMISSION_FIRST, 10) == []
    assert ran == []  # the survey (fetch_one) said no; the listing never ran

    query("UPDATE outbox SET lease_expires_at = now() - interval '1 second' WHERE run_id = 'leased'")
    assert [row["run_id"] for row in claims.list_ready_runs(Lane.LEDGER, HeadPriority.ADMISSION_FIRST, 10)] \
        == ["leased"]
    # Planned once per connection or per call, as the survey found the outbox's statistics (test_listing_statistics).
    assert ran in (["outbox_list_ready_runs_generic"], ["outbox_list_ready_runs"])
