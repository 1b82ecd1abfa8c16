# RUN-10, CLN-1: the control table keeps every cancel ever queued (a key's existence is the cancel), so the
# sweep's reads of it grew with history: the unacknowledged-cancel listing hashed the cancels and probed every
# parked run (130 ms a tick at 300,000 parked runs and 10,000 old cancels), and the unparked-sandbox hints were
# found by a sequential scan. Two partial indexes: cancels whose run the sweep has not yet seen ended (it marks
# them `runEndedAt` as it sees them), and the hints by age. Why safe during a deploy: non-atomic,
# CONCURRENTLY; older code neither uses them nor writes the mark, and a cancel it queues is open (indexed).

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

OPEN_CANCELS_INDEX = "runtime_scheduler_control_open_cancels_idx"
UNRECONCILED_INDEX = "runtime_scheduler_control_unreconciled_idx"


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0026_drop_ledger_event_like_index")]

    operations = [
        concurrent_index(OPEN_CANCELS_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {OPEN_CANCELS_INDEX} ON control (key) "
                         "WHERE key LIKE 'runtime_cancel:%' AND NOT (value_json ? 'runEndedAt')"),
        concurrent_index(UNRECONCILED_INDEX,
                         f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {UNRECONCILED_INDEX} ON control (created_at) "
                         "WHERE key LIKE 'sandbox_unreconciled:%'"),
    ]
