# RET-1, RET-3: the open obligations by run, for the prune's pick and the held counts. Without them the planner
# read every cleanup job and billing job of the database once a statement (a hashed scan of ~60,000 rows each, 8 ms
# of a 15 ms statement at any batch size); these hold only the open ones, so that read is a few index entries. Why
# safe during a deploy: non-atomic, CONCURRENTLY; older code never reads them.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

INDEXES = {
    "runtime_scheduler_cleanup_v2_open_run_idx": "ON sandbox_cleanup_jobs_v2 (run_id) WHERE status <> 'deleted'",
    "runtime_scheduler_billing_open_run_idx": "ON compute_billing_jobs_v2 (run_id) WHERE status <> 'finalized'",
}


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0036_retention_indexes")]

    operations = [concurrent_index(name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")
                  for name, definition in INDEXES.items()]
