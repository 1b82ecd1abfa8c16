# Issue 47: a delivery's lease becomes a HOT update. The blocker index (0011) listed a fact once leased
# (lease_owner IS NOT NULL in its predicate), so leasing a fact and clearing its lease each wrote index entries: an
# update is HOT only when no indexed column, predicate columns included, changes. The index keeps what it is read
# for (failed and backing-off facts: the admin's and /metrics' counts); a live lease is found through the pending
# index by run, a few facts each. Rebuilt under the same name, so every release's shape check finds it. Why safe
# during a deploy: non-atomic; the new index is built CONCURRENTLY before the old one is dropped CONCURRENTLY, and
# the rename takes a SHARE UPDATE EXCLUSIVE lock (no reader or writer waits); no statement of any release needs the
# lease in the predicate to be correct. Rerun after a failure at any step, it finishes the same swap.

from django.db import migrations

from scheduler.migrations._concurrent_index import _index_state
from scheduler.schema.qualified import SchedulerMigration

BLOCKER_INDEX = "runtime_scheduler_outbox_blocker_idx"
REBUILT = "runtime_scheduler_outbox_blocker_rebuilt_idx"
WITHOUT_LEASE = "delivered_at IS NULL AND (failed_at IS NOT NULL OR next_attempt_at IS NOT NULL)"
WITH_LEASE = "delivered_at IS NULL AND (failed_at IS NOT NULL OR next_attempt_at IS NOT NULL OR lease_owner IS NOT NULL)"


def _swap(predicate: str, names_lease: bool):
    def swap(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT pg_get_indexdef(to_regclass(%s))", [BLOCKER_INDEX])
            definition = cursor.fetchone()[0]
            if definition is not None and ("lease_owner" in definition) == names_lease and _index_state(cursor, BLOCKER_INDEX):
                return
            if _index_state(cursor, REBUILT) is False:
                cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{REBUILT}"')
            cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{REBUILT}" ON outbox (run_id, lane) WHERE {predicate}')
            cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{BLOCKER_INDEX}"')
            cursor.execute(f'ALTER INDEX "{REBUILT}" RENAME TO "{BLOCKER_INDEX}"')

    return swap


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0042_durable_wait_indexes")]

    operations = [migrations.RunPython(_swap(WITHOUT_LEASE, False), _swap(WITH_LEASE, True), atomic=False,
                                       elidable=False)]
