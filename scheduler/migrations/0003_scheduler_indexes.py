# The indexes the scheduler's statements read through. Why safe during a
# deploy: non-atomic, each built CONCURRENTLY IF NOT EXISTS (writes continue),
# and an INVALID leftover from a failed build is rebuilt.

from django.db import migrations

from scheduler.migrations._concurrent_index import concurrent_index
from scheduler.schema.qualified import SchedulerMigration

INDEXES = [
    # runs_claim_queued (RUN-2): oldest queued runs first.
    ("runtime_scheduler_runs_queued_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_runs_queued_idx "
     "ON runs (created_at, run_id) WHERE status = 'queued'"),
    # runs_list_liveness_work (SWP-1): live detached runners only, so discovery
    # stays flat however much terminal history accumulates.
    ("runtime_scheduler_runs_detached_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_runs_detached_idx "
     "ON runs (run_id) WHERE status IN ('running', 'waiting') AND suspension_json ->> 'kind' = 'detached_runner'"),
    # runs_list_passed_wait_deadlines (SWP-7): waiting runs with a hard ceiling.
    ("runtime_scheduler_runs_wait_deadline_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_runs_wait_deadline_idx "
     "ON runs (wait_deadline) WHERE status = 'waiting' AND wait_deadline IS NOT NULL"),
    # attempts_list_expired_claims (RUN-9): claims that never parked.
    ("runtime_scheduler_attempts_claim_lease_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_attempts_claim_lease_idx "
     "ON attempts (lease_expires_at) WHERE status IN ('claimed', 'running')"),
    # outbox heads, ready heads and prefix claims (OBX-2..5): undelivered facts per run and lane.
    ("runtime_scheduler_outbox_pending_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_outbox_pending_idx "
     "ON outbox (run_id, lane, created_at, event_id) WHERE delivered_at IS NULL"),
    # outbox causal created_at (OBX-1): the latest fact of a run.
    ("runtime_scheduler_outbox_run_created_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_outbox_run_created_idx "
     "ON outbox (run_id, created_at)"),
    # sandbox_cleanup_jobs_v2_claim (CLN-4): due rows per provider.
    ("runtime_scheduler_cleanup_v2_due_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_cleanup_v2_due_idx "
     "ON sandbox_cleanup_jobs_v2 (provider, available_at) WHERE status = 'pending'"),
    # sandbox_cleanup_adoption_preflight (CLN-2): unresolved null-domain daytona rows.
    ("runtime_scheduler_cleanup_v2_null_domain_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_cleanup_v2_null_domain_idx "
     "ON sandbox_cleanup_jobs_v2 (sandbox_id) WHERE provider = 'daytona' AND routing_domain IS NULL AND status <> 'deleted'"),
    # sandbox_cleanup_adopt (CLN-3): tombstones by obligation identity.
    ("runtime_scheduler_cleanup_v2_identity_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_cleanup_v2_identity_idx "
     "ON sandbox_cleanup_jobs_v2 (sandbox_id, run_id, attempt)"),
    # sandbox_cleanup_read_acceptance / completion / adoption (CLN-3, CLN-5, CLN-6).
    ("runtime_scheduler_cleanup_events_identity_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_cleanup_events_identity_idx "
     "ON sandbox_cleanup_events_v2 (sandbox_id, run_id, attempt, event_type, created_at)"),
    # compute_billing_jobs_claim (BIL-1): due billing jobs.
    ("runtime_scheduler_billing_jobs_due_idx",
     "CREATE INDEX CONCURRENTLY IF NOT EXISTS runtime_scheduler_billing_jobs_due_idx "
     "ON compute_billing_jobs_v2 (available_at) WHERE status = 'pending'"),
]


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0002_runs_array_input_started")]

    operations = [concurrent_index(name, sql) for name, sql in INDEXES]
