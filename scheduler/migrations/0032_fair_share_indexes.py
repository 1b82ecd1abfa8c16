# FSH-1..4: the claim finds each org's next runs, and counts what an org (and a key of it) holds, without reading
# another org's backlog: the queued runs by org, then priority, then age; the active runs by org and key; the orgs with a keyed run queued. Runs
# without an org form one org, ''. Why safe during a deploy: non-atomic, CONCURRENTLY; partial, so they cost
# only queued and active runs, and older code never reads them.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

ORG_QUEUE_INDEX = "runtime_scheduler_runs_org_queue_idx"
ORG_ACTIVE_INDEX = "runtime_scheduler_runs_org_active_idx"
ORG_KEYED_INDEX = "runtime_scheduler_runs_org_keyed_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0031_fair_share")]

    operations = [
        concurrent_index(ORG_QUEUE_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ORG_QUEUE_INDEX} "
                         "ON runs ((coalesce(org_id, '')), priority DESC, created_at, run_id) WHERE status = 'queued'"),
        concurrent_index(ORG_ACTIVE_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ORG_ACTIVE_INDEX} "
                         "ON runs ((coalesce(org_id, '')), concurrency_key) WHERE status IN ('running', 'waiting')"),
        # Whether an org has a keyed run queued (its claim is then counted) without walking its keyless backlog.
        concurrent_index(ORG_KEYED_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ORG_KEYED_INDEX} "
                         "ON runs ((coalesce(org_id, ''))) WHERE status = 'queued' AND concurrency_key IS NOT NULL"),
    ]
