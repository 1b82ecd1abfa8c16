"""WAIT-4's cost: the timer loop finds due waits through the durable-wait index, whatever else the runs table holds.

Its own test, on a population it analyzes itself: a generic plan follows the table's statistics, and those are
whatever the suite's last ANALYZE of runs left (a plan asserted beside other tests' data once read another index).
"""

import pytest

from tests.factories import query
from tests.support import generic_plan

pytestmark = pytest.mark.django_db


@pytest.mark.requirement("WAIT-4")
def test_due_timers_are_found_through_the_durable_wait_index():
    query("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, finished_at)
             SELECT 'done-' || i, 'org', 'play', 'completed', '{}', 1, now() FROM generate_series(1, 5000) AS i;
             INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts)
             SELECT 'parked-' || i, 'org', 'play', 'waiting', '{}', 1 FROM generate_series(1, 2000) AS i;
             INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, suspension_json,
                               wait_deadline)
             SELECT 'timer-' || i, 'org', 'play', 'waiting', '{}', 1, '{"kind": "timer", "attempt": 1}',
                    now() + i * interval '1 second'
             FROM generate_series(1, 20) AS i;
             ANALYZE runs""")

    assert "runtime_scheduler_runs_durable_wait_idx" in generic_plan("runs_wake_due_waits", {"limit": 10, "now": None})
