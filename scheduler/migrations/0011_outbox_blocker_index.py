# The few undelivered facts that can block a run's lane: failed, backing off
# or leased. Why safe during a deploy: non-atomic, CONCURRENTLY, tiny.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

# outbox_list_ready_runs and outbox_lease_prefixes: "is this lane blocked or held?"
BLOCKER_INDEX = "runtime_scheduler_outbox_blocker_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0010_outbox_delivery_indexes")]

    operations = [
        concurrent_index(
            BLOCKER_INDEX,
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {BLOCKER_INDEX} ON outbox (run_id, lane) "
            "WHERE delivered_at IS NULL AND (failed_at IS NOT NULL OR next_attempt_at IS NOT NULL OR lease_owner IS NOT NULL)",
        ),
    ]
