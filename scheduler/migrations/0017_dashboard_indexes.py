# Indexes the admin dashboard's figures read, so none of them grows with
# history (the runs, outbox and cleanup tables keep every finished row). Why
# safe during a deploy: non-atomic, CONCURRENTLY, partial (small).

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

INDEXES = {
    "runtime_scheduler_runs_open_idx": "ON runs (status) WHERE status IN ('running', 'waiting')",
    "runtime_scheduler_runs_failed_recent_idx": "ON runs (finished_at) WHERE status = 'failed'",
    "runtime_scheduler_cleanup_v2_pending_created_idx": "ON sandbox_cleanup_jobs_v2 (created_at) WHERE status = 'pending'",
    "runtime_scheduler_cleanup_v2_blocked_idx": "ON sandbox_cleanup_jobs_v2 (created_at) WHERE status = 'blocked'",
}


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0016_operator_actions")]

    operations = [concurrent_index(name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")
                  for name, definition in INDEXES.items()]
