"""Runs, attempts, control keys, release admission, receipts, the schema marker.

The models mirror tables whose names and columns are a contract (requirements §1);
the database, not the ORM, writes them (scheduler/sql/). Triggers declared
here hold the invariants the database can hold itself.
"""

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from scheduler.kinds import TERMINAL_RUN_STATUSES, AttemptStatus, ReceiptStatus, RunStatus, values
from scheduler.models.invariants import SchemaTrigger, call, refuse
from scheduler.schema.qualified import table

RUN_STATUSES = values(RunStatus)
ATTEMPT_STATUSES = values(AttemptStatus)
RECEIPT_STATUSES = values(ReceiptStatus)
TERMINAL_STATUS_VALUES = tuple(status.value for status in RunStatus if status in TERMINAL_RUN_STATUSES)


class Run(models.Model):
    run_id = models.TextField(primary_key=True)
    org_id = models.TextField(null=True)
    play_name = models.TextField()
    graph_hash = models.TextField(null=True)
    runtime_profile = models.TextField(null=True)
    definition_scope = models.TextField(null=True)
    status = models.TextField()
    launch_json = models.JSONField(db_default={})
    input_json = models.JSONField(null=True)
    suspension_json = models.JSONField(null=True)
    terminal_result_json = models.JSONField(null=True)
    runtime_resources_json = models.JSONField(db_default=[])
    runtime_timing_json = models.JSONField(null=True)
    wait_deadline = models.DateTimeField(null=True)
    run_log_store = models.TextField(null=True)
    max_attempts = models.IntegerField(db_default=3)
    array_input_started = models.BooleanField(db_default=False)
    # FSH-5: the launch's idempotency key and a digest of its body (a repeat with another body is a conflict).
    idempotency_key = models.TextField(null=True)
    idempotency_digest = models.TextField(null=True)
    # FSH-2, FSH-3, FSH-7: what the claim weighs besides the run's age (scheduler/sql/claim.sql).
    priority = models.SmallIntegerField(db_default=0)
    concurrency_key = models.TextField(null=True)
    concurrency_limit = models.IntegerField(null=True)
    run_after = models.DateTimeField(null=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)

    class Meta:
        db_table = table("runs")
        permissions = [("cancel_run", "Can cancel runs (operator repair)"),
                       ("declare_runner_lost", "Can declare a parked run's runner lost (operator repair)"),
                       ("end_wait", "Can end a run's durable wait now (operator repair)")]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=RUN_STATUSES), name="runs_status_check"),
            models.CheckConstraint(
                condition=models.Q(definition_scope__in=("org", "system")), name="runs_definition_scope_check"
            ),
            models.CheckConstraint(condition=models.Q(run_log_store="planet_scale"), name="runs_run_log_store_check"),
            models.CheckConstraint(condition=models.Q(max_attempts__gte=1), name="runs_max_attempts_check"),
            models.CheckConstraint(condition=models.Q(priority__gte=-100, priority__lte=100), name="runs_priority_check"),
            models.CheckConstraint(condition=models.Q(concurrency_key__isnull=True)
                                   | models.Q(concurrency_limit__gte=1, concurrency_limit__lte=1000),
                                   name="runs_concurrency_check"),
        ]
        triggers = [
            # A terminal run never changes status again (requirements §1.1).
            SchemaTrigger(
                name="terminal_run_status_frozen",
                operation=pgtrigger.Update,
                when=pgtrigger.After,
                condition=pgtrigger.Q(old__status__in=TERMINAL_STATUS_VALUES)
                & pgtrigger.Q(new__status__df=pgtrigger.F("old__status")),
                func=refuse("'run % is % (terminal) and cannot change status to %', OLD.run_id, OLD.status, NEW.status"),
            ),
            # Wake dispatchers when a run is queued (a launch or a retry): LISTEN <schema>_run_queued.
            # Notifications of one transaction fold into one; polling stays the fallback.
            SchemaTrigger(
                name="run_queued_wakes_dispatchers",
                operation=pgtrigger.Insert | pgtrigger.Update,
                when=pgtrigger.After,
                condition=pgtrigger.Q(new__status=RunStatus.QUEUED.value),
                func=call("wake_listeners", "'run_queued'") + " RETURN NULL;",
            ),
            # RCP-1: a settled run leaves no receipt running; held leases go back to queued. A trigger, not a CTE of
            # the settling statements: its UPDATE takes a fresh snapshot after the run's row lock is granted, so it
            # also sees a receipt a concurrent claim (holding the run's share lock) committed meanwhile.
            SchemaTrigger(
                name="settled_run_releases_receipts",
                operation=pgtrigger.Update,
                when=pgtrigger.After,
                condition=pgtrigger.Q(new__status__in=TERMINAL_STATUS_VALUES)
                & pgtrigger.Q(old__status__df=pgtrigger.F("new__status")),
                func=call("release_settled_receipts", "NEW.run_id") + " RETURN NULL;",
            ),
        ]

    def __str__(self):
        return f"{self.run_id} ({self.status})"


class Attempt(models.Model):
    pk = models.CompositePrimaryKey("run_id", "attempt")
    run = models.ForeignKey(Run, models.DO_NOTHING, db_column="run_id", db_index=False, related_name="attempts")
    attempt = models.IntegerField()
    status = models.TextField()
    lease_token = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    heartbeat_at = models.DateTimeField(null=True)
    runner_result_json = models.JSONField(null=True)
    runner_log_payload_json = models.JSONField(null=True)
    runner_terminal_received_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True)
    # SWP-1: when a parked runner becomes overdue (heartbeat or start, plus its timeout), set by park and moved by
    # a heartbeat once half a timeout or less remains, so discovery finds the overdue through an index. Never later
    # than the real deadline: a kept one, or one a writer that does not maintain it left older (or NULL), only makes
    # a candidate to recheck.
    liveness_deadline = models.DateTimeField(null=True)

    class Meta:
        db_table = table("attempts")
        constraints = [
            models.CheckConstraint(condition=models.Q(attempt__gte=1), name="attempts_attempt_check"),
            models.CheckConstraint(condition=models.Q(status__in=ATTEMPT_STATUSES), name="attempts_status_check"),
        ]
        triggers = [
            # A completed or failed attempt keeps its status and its result (one verdict).
            SchemaTrigger(
                name="finished_attempt_frozen",
                operation=pgtrigger.Update,
                when=pgtrigger.After,
                condition=pgtrigger.Q(old__status__in=("completed", "failed"))
                & (
                    pgtrigger.Q(new__status__df=pgtrigger.F("old__status"))
                    | pgtrigger.Q(new__runner_result_json__df=pgtrigger.F("old__runner_result_json"))
                ),
                func=refuse(
                    "'attempt % of run % is % and cannot change its status or result', "
                    "OLD.attempt, OLD.run_id, OLD.status"
                ),
            ),
        ]


class LateRunnerResult(models.Model):
    """A runner's terminal that arrived after a scheduler verdict settled its attempt: kept beside the verdict,
    never winning over it (the attempt, the run and the ledger keep the verdict)."""

    pk = models.CompositePrimaryKey("run_id", "attempt")
    run = models.ForeignKey(Run, models.DO_NOTHING, db_column="run_id", db_index=False, related_name="late_results")
    attempt = models.IntegerField()
    result_json = models.JSONField()
    received_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("late_runner_results")
        verbose_name = "late runner result"

    def __str__(self):
        return f"{self.run_id} attempt {self.attempt} (late)"


class ControlKey(models.Model):
    key = models.TextField(primary_key=True)
    value_json = models.JSONField(db_default={})
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("control")


class ReleaseAdmission(models.Model):
    release_id = models.TextField(primary_key=True)
    accepting = models.BooleanField()
    admission_epoch = models.BigIntegerField()
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("runtime_release_admission")
        permissions = [("set_release_admission", "Can open or close a release's admission (operator repair)")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(admission_epoch__gte=0, admission_epoch__lte=2**53 - 1),
                name="runtime_release_admission_epoch_check",
            ),
        ]


class Receipt(models.Model):
    pk = models.CompositePrimaryKey("run_id", "key")
    run = models.ForeignKey(Run, models.DO_NOTHING, db_column="run_id", db_index=False, related_name="receipts")
    key = models.TextField()
    status = models.TextField()
    lease_id = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    run_attempt = models.IntegerField(null=True)
    output_json = models.JSONField(null=True)
    error_json = models.JSONField(null=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("receipts")
        triggers = [
            # RCP-1, first write wins: a completed receipt keeps its status and its output.
            SchemaTrigger(
                name="completed_receipt_frozen",
                operation=pgtrigger.Update,
                when=pgtrigger.After,
                condition=pgtrigger.Q(old__status=ReceiptStatus.COMPLETED.value)
                & (pgtrigger.Q(new__status__df=pgtrigger.F("old__status"))
                   | pgtrigger.Q(new__output_json__df=pgtrigger.F("old__output_json"))),
                func=refuse("'receipt % of run % is completed and keeps its output', OLD.key, OLD.run_id"),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=RECEIPT_STATUSES), name="receipts_status_check"),
        ]


class SchemaVersion(models.Model):
    """Deployment work done (SCH-1); never a floor that code refuses to run below."""

    version = models.IntegerField(primary_key=True)
    applied_at = models.DateTimeField(db_default=Now())
    description = models.TextField(null=True)

    class Meta:
        db_table = table("scheduler_schema_migrations")
