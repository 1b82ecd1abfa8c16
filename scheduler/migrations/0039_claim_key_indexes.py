# FSH-12: the claim reaches a claimable run however many runs of a full key queue ahead of it: an org's keyless
# queued runs in its order, and its keyed queued runs per key in their order (the claim skip-scans the keys and
# takes from each only what its limit leaves). Why safe during a deploy: non-atomic, CONCURRENTLY; partial, so
# they cost only queued runs; older code never reads them (and keeps the 0032 indexes it reads).

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

ORG_KEYLESS_QUEUE_INDEX = "runtime_scheduler_runs_org_keyless_queue_idx"
ORG_KEY_QUEUE_INDEX = "runtime_scheduler_runs_org_key_queue_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0038_qualified_tables")]

    operations = [
        concurrent_index(ORG_KEYLESS_QUEUE_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ORG_KEYLESS_QUEUE_INDEX} "
                         "ON runs ((coalesce(org_id, '')), priority DESC, created_at, run_id) "
                         "WHERE status = 'queued' AND concurrency_key IS NULL"),
        concurrent_index(ORG_KEY_QUEUE_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ORG_KEY_QUEUE_INDEX} "
                         "ON runs ((coalesce(org_id, '')), concurrency_key, priority DESC, created_at, run_id) "
                         "WHERE status = 'queued' AND concurrency_key IS NOT NULL"),
    ]
