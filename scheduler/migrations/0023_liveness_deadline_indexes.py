# SWP-1, SWP-5: discovery probes the overdue waiting attempts (and those whose deadline nobody kept) and the
# recorded-but-unsettled terminals through two small partial indexes instead of reading every parked run.
# Why safe during a deploy: non-atomic, CONCURRENTLY; older code never uses them.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

DEADLINE_INDEX = "runtime_scheduler_attempts_liveness_deadline_idx"
RECORDED_INDEX = "runtime_scheduler_attempts_recorded_unsettled_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0022_attempt_liveness_deadline")]

    operations = [
        concurrent_index(DEADLINE_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {DEADLINE_INDEX} ON attempts (liveness_deadline) "
                         "WHERE status = 'waiting' AND runner_result_json IS NULL"),
        concurrent_index(RECORDED_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {RECORDED_INDEX} ON attempts (run_id) "
                         "WHERE status IN ('claimed', 'running', 'waiting') AND runner_result_json IS NOT NULL"),
    ]
