# SCH-5: the optional partial index over pending legacy cleanup rows, which
# keeps the adoption preflight cheap when the legacy table holds a long
# deleted history. Why safe during a deploy: non-atomic, CONCURRENTLY, and
# cleanup stays correct without it (the check can exclude it).

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

LEGACY_CLEANUP_PENDING_INDEX = "runtime_scheduler_sandbox_cleanup_legacy_pending_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0004_invariant_triggers")]

    operations = [
        concurrent_index(
            LEGACY_CLEANUP_PENDING_INDEX,
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {LEGACY_CLEANUP_PENDING_INDEX} "
            "ON sandbox_cleanup_jobs (sandbox_id) WHERE status <> 'deleted'",
        ),
    ]
