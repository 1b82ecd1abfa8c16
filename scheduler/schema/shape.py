"""The schema-shape check (SCH-4): is this database ready for this code?

Requirements are derived from the models (tables, columns with type,
nullability and default, constraints, triggers) plus the indexes and the
dispatch-launch function the statements need. Optional v64 items can be
excluded by name. Reading the catalog never changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connections
from django.db.models import NOT_PROVIDED

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import bare

# The indexes the statements need by name, built by the migrations (0003 onwards, each CONCURRENTLY).
REQUIRED_INDEXES = (
    "runtime_scheduler_runs_queued_idx",
    "runtime_scheduler_runs_detached_idx",
    "runtime_scheduler_runs_wait_deadline_idx",
    "runtime_scheduler_attempts_claim_lease_idx",
    "runtime_scheduler_outbox_pending_idx",
    "runtime_scheduler_outbox_run_created_idx",
    "runtime_scheduler_cleanup_v2_due_idx",
    "runtime_scheduler_cleanup_v2_null_domain_idx",
    "runtime_scheduler_cleanup_v2_identity_idx",
    "runtime_scheduler_cleanup_events_identity_idx",
    "runtime_scheduler_billing_jobs_due_idx",
    "runtime_scheduler_outbox_ready_idx",
    "runtime_scheduler_outbox_milestone_idx",
    "runtime_scheduler_run_ledger_events_run_idx",
    "runtime_scheduler_outbox_blocker_idx",
    "runtime_scheduler_runs_open_idx",
    "runtime_scheduler_runs_failed_recent_idx",
    "runtime_scheduler_cleanup_v2_pending_created_idx",
    "runtime_scheduler_cleanup_v2_blocked_idx",
    "runtime_scheduler_runs_created_idx",
    "runtime_scheduler_attempts_liveness_deadline_idx",
    "runtime_scheduler_attempts_recorded_unsettled_idx",
    "runtime_scheduler_control_open_cancels_idx",
    "runtime_scheduler_control_unreconciled_idx",
    "runtime_scheduler_runs_idempotency_idx",
    "runtime_scheduler_runs_org_queue_idx",
    "runtime_scheduler_runs_org_active_idx",
    "runtime_scheduler_runs_org_keyed_idx",
    "runtime_scheduler_runs_finished_idx",
    "runtime_scheduler_cleanup_v2_run_idx",
    "runtime_scheduler_cleanup_events_run_idx",
    "runtime_scheduler_cleanup_legacy_run_idx",
    "runtime_scheduler_schedule_fires_run_idx",
    "runtime_scheduler_billing_items_created_idx",
    "runtime_scheduler_cleanup_v2_open_run_idx",
    "runtime_scheduler_billing_open_run_idx",
    "runtime_scheduler_runs_durable_wait_idx",
    "runtime_scheduler_runs_org_holding_idx",
)
LEGACY_CLEANUP_PENDING_INDEX = "runtime_scheduler_sandbox_cleanup_legacy_pending_idx"
REQUIRED_FUNCTIONS = (
    "run_ledger_dispatch_launch(launch jsonb)",
    "next_fact_time(p_run_id text, p_step integer)",
    "runtime_json_is_count(value jsonb)",
    "release_settled_receipts(p_run_id text)",
    "wake_listeners(p_signal text)",
    "wait_wakers(p_run_id text, p_event_name text)",
)

# Optional v64 items: name -> what it stands for.
OPTIONAL_ITEMS = {
    "array_input_intent": "column runs.array_input_started",
    "legacy_cleanup_pending_index": f"index {LEGACY_CLEANUP_PENDING_INDEX}",
}


@dataclass
class ShapeReport:
    schema: str
    problems: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.problems


def scheduler_models():
    from scheduler import models

    return [
        models.Run, models.Attempt, models.OutboxFact, models.ControlKey, models.ReleaseAdmission,
        models.Receipt, models.SchemaVersion, models.LateRunnerResult, models.OperatorAction, models.LegacyCleanupJob, models.CleanupJob,
        models.CleanupEvent, models.BillingJob, models.BillingItem, models.RunLedgerEvent, models.WakeSignal,
    ]


def _expected_columns(model, connection):
    for model_field in model._meta.concrete_fields:
        if model_field.column is None:
            continue  # the CompositePrimaryKey pseudo-field
        yield (
            model_field.column,
            model_field.db_type(connection),
            not model_field.null,
            model_field.db_default is not NOT_PROVIDED,
        )


def check_schema_shape(without: set[str] = frozenset(), using: str = "default") -> ShapeReport:
    """Compare the catalog with what the code needs; list every missing or wrong item."""
    unknown = set(without) - set(OPTIONAL_ITEMS)
    if unknown:
        raise ValueError(f"unknown optional item(s): {', '.join(sorted(unknown))}; known: {', '.join(OPTIONAL_ITEMS)}")
    schema = scheduler_settings.schema
    connection = connections[using]
    report = ShapeReport(schema)
    params = {"schema": schema}
    columns = {(row["table_name"], row["column_name"]): row for row in db.fetch_all("schema_shape_columns", params, using=using)}
    tables = {table for table, _ in columns}
    constraints = {(row["table_name"], row["constraint_name"]) for row in db.fetch_all("schema_shape_constraints", params, using=using)}
    indexes = {row["index_name"]: row["valid"] for row in db.fetch_all("schema_shape_indexes", params, using=using)}
    functions = {row["signature"] for row in db.fetch_all("schema_shape_functions", params, using=using)}
    triggers = {(row["table_name"], row["trigger_name"]) for row in db.fetch_all("schema_shape_triggers", params, using=using)}

    for model in scheduler_models():
        table = bare(model._meta.db_table)
        if table not in tables:
            report.problems.append(f"missing table {table}")
            continue
        for column, data_type, not_null, has_default in _expected_columns(model, connection):
            optional = table == "runs" and column == "array_input_started" and "array_input_intent" in without
            found = columns.get((table, column))
            wanted = f"{data_type}{' NOT NULL' if not_null else ''}{' DEFAULT ...' if has_default else ''}"
            if found is None:
                if not optional:
                    report.problems.append(f"missing column {table}.{column} ({wanted})")
            elif (found["data_type"], found["not_null"], found["has_default"]) != (data_type, not_null, has_default):
                if not optional:
                    actual = f"{found['data_type']}{' NOT NULL' if found['not_null'] else ''}{' DEFAULT ...' if found['has_default'] else ''}"
                    report.problems.append(f"wrong column {table}.{column}: want {wanted}, found {actual}")
        for name in [f"{table}_pkey"] + [constraint.name for constraint in model._meta.constraints]:
            if (table, name) not in constraints:
                report.problems.append(f"missing constraint {name} on {table}")
        for trigger in getattr(model._meta, "triggers", []):
            pgid = trigger.get_pgid(model)
            if (table, pgid) not in triggers:
                report.problems.append(f"missing trigger {pgid} ({trigger.name}) on {table}")

    wanted_indexes = list(REQUIRED_INDEXES)
    if "legacy_cleanup_pending_index" not in without:
        wanted_indexes.append(LEGACY_CLEANUP_PENDING_INDEX)
    for name in wanted_indexes:
        if name not in indexes:
            report.problems.append(f"missing index {name}")
    for name, valid in sorted(indexes.items()):
        if not valid:
            report.problems.append(f"invalid index {name} (a failed CONCURRENTLY build: rerun migrate)")
    for signature in REQUIRED_FUNCTIONS:
        if signature not in functions:
            report.problems.append(f"missing function {signature}")
    return report
