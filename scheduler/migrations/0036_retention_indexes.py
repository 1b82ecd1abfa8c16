# RET-1..4: what pruning reads. The finished runs by when they finished (the pick is a range of this index, never a
# scan of the live table); each run's cleanup jobs, events and legacy rows and its schedule fire by run id (the
# obligation check and the delete are index probes); billing items by age (RET-2). Why safe during a deploy:
# non-atomic, CONCURRENTLY; older code never reads them.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

INDEXES = {
    "runtime_scheduler_runs_finished_idx":
        "ON runs (finished_at, run_id) WHERE status IN ('completed', 'failed', 'cancelled')",
    "runtime_scheduler_cleanup_v2_run_idx": "ON sandbox_cleanup_jobs_v2 (run_id)",
    "runtime_scheduler_cleanup_events_run_idx": "ON sandbox_cleanup_events_v2 (run_id)",
    "runtime_scheduler_cleanup_legacy_run_idx": "ON sandbox_cleanup_jobs (run_id)",
    "runtime_scheduler_schedule_fires_run_idx": "ON schedule_fires (run_id) WHERE run_id IS NOT NULL",
    "runtime_scheduler_billing_items_created_idx": "ON billing_items (created_at)",
}


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0035_prune_deletes_tombstones")]

    operations = [concurrent_index(name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")
                  for name, definition in INDEXES.items()]
