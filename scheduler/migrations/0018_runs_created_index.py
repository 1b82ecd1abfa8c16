# Newest-first lists of runs (the admin, GET /internal/runs, list_runs) walk
# this index with a keyset cursor instead of sorting the table. Why safe
# during a deploy: non-atomic, CONCURRENTLY.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

RUNS_CREATED_INDEX = "runtime_scheduler_runs_created_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0017_dashboard_indexes")]

    operations = [
        concurrent_index(RUNS_CREATED_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {RUNS_CREATED_INDEX} ON runs (created_at, run_id)"),
    ]
