# Indexes the outbox delivery statements read through. Why safe during a
# deploy: non-atomic, each built CONCURRENTLY IF NOT EXISTS.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

INDEXES = [
    # outbox_claim_choose_run (OBX-3, OBX-4 oldest_ready): undelivered facts by age per lane.
    ("runtime_scheduler_outbox_ready_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_outbox_ready_idx "
     "ON outbox (lane, created_at, event_id) WHERE delivered_at IS NULL"),
    # outbox_claim_choose_run (OBX-4 admission_first): pending admissions, waits and terminals by age.
    ("runtime_scheduler_outbox_milestone_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_outbox_milestone_idx "
     "ON outbox (lane, event_type, created_at) WHERE delivered_at IS NULL"),
    # run_ledger_events by run (the built-in receiver's reads).
    ("runtime_scheduler_run_ledger_events_run_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_run_ledger_events_run_idx "
     "ON run_ledger_events (run_id, occurred_at)"),
]


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0009_run_ledger_receiver")]

    operations = [concurrent_index(name, sql) for name, sql in INDEXES]
