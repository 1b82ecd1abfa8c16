"""RET-1, RET-3 at scale: the prune's pick is a range of the finished-runs index, never a scan of the live table."""

import pytest
from django.db import connection

from scheduler.history import pruning
from tests.support import logged_plans

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_table():
    """20,000 open runs and 20,000 finished ones (a tenth past retention) with a delivered fact each, analyzed."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, created_at)
            SELECT 'open-' || i, 'org', 'p', CASE WHEN i % 2 = 0 THEN 'queued' ELSE 'waiting' END, '{}', now()
            FROM generate_series(1, 20000) AS i;
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, created_at, finished_at)
            SELECT 'done-' || i, 'org', 'p', 'completed', '{}', now() - i * interval '3 minutes',
                   now() - i * interval '3 minutes'
            FROM generate_series(1, 20000) AS i;
            INSERT INTO outbox (event_id, run_id, event_type, delivered_at)
            SELECT 'done-' || i || ':run.created', 'done-' || i, 'run.created', now() FROM generate_series(1, 20000) AS i;
            ANALYZE runs; ANALYZE outbox;
        """)


def test_the_pick_and_the_held_count_are_index_ranges_of_finished_runs(busy_table, settings):
    settings.SCHEDULER_RETENTION_DAYS = 36  # 36 of the 41.7 days the finished runs span: the oldest ~14%
    with logged_plans() as plans:
        assert pruning.run_once(batch=100).counts["runs"] == 100
        pruning.held()
    picks = [plan for plan in plans if "runs_finished_idx" in plan or "on runs run" in plan]
    assert len(picks) >= 2, plans
    for plan in picks:
        assert "Seq Scan on runs" not in plan, plan
        assert "Seq Scan on outbox" not in plan, plan
