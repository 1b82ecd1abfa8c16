# FSH-5: one kept run per (org, idempotency key): the launch's ON CONFLICT arbiter, so concurrent duplicates
# create exactly one run. NULLS NOT DISTINCT, so runs without an org share one key space too. Why safe during a
# deploy: non-atomic, CONCURRENTLY; partial (only keyed runs), so older code's launches never touch it.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

IDEMPOTENCY_INDEX = "runtime_scheduler_runs_idempotency_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0029_idempotent_launches")]

    operations = [
        concurrent_index(IDEMPOTENCY_INDEX,
                         f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {IDEMPOTENCY_INDEX} "
                         "ON runs (org_id, idempotency_key) NULLS NOT DISTINCT WHERE idempotency_key IS NOT NULL"),
    ]
