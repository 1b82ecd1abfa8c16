# WAIT-4, WAIT-6: due waits are found through an index of the durably waiting runs by deadline, and what an org
# holds is counted through indexes that leave those runs out (a waiting run holds no slot). The predicates are
# word for word the fragments durable_wait and holds_slot (sql/fragments_waits.sql), which is what lets the planner
# use them. The holding predicate names the statuses a run holding a slot is not, rather than those it is: then the
# 0032 active index (WHERE status IN ('running', 'waiting')), which also lists every durably waiting run, is not
# provably usable for it, and the planner, which cannot tell how few runs the kind test keeps, never walks a
# backlog of waiting runs to count none of them (it did: 10,000 index entries read to count 0). Why safe during a deploy: non-atomic, CONCURRENTLY; partial; older code never reads them (and keeps the
# 0032 active index it reads).

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

DURABLE_WAIT_INDEX = "runtime_scheduler_runs_durable_wait_idx"
ORG_HOLDING_INDEX = "runtime_scheduler_runs_org_holding_idx"
DURABLE_WAIT = "status = 'waiting' AND (suspension_json ->> 'kind') IN ('event', 'timer')"
HOLDS_SLOT = ("status NOT IN ('queued', 'completed', 'failed', 'cancelled') "
              "AND coalesce(suspension_json ->> 'kind', '') NOT IN ('event', 'timer')")


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0041_durable_waits")]

    operations = [
        concurrent_index(DURABLE_WAIT_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {DURABLE_WAIT_INDEX} "
                         f"ON runs (wait_deadline, run_id) WHERE {DURABLE_WAIT}"),
        concurrent_index(ORG_HOLDING_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {ORG_HOLDING_INDEX} "
                         f"ON runs ((coalesce(org_id, '')), concurrency_key) WHERE {HOLDS_SLOT}"),
    ]
