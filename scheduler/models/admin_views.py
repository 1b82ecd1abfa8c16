"""Read-only views over the composite-key tables, for the Django admin.

Django's admin cannot register a model with a composite primary key, so
attempts, receipts and v2 cleanup jobs are shown through views that add a
synthetic text key. Secrets (lease tokens, log payloads) are not selected.
"""

from django.db import models
from scheduler.schema.qualified import table


class AttemptRow(models.Model):
    admin_key = models.TextField(primary_key=True)
    run_id = models.TextField()
    attempt = models.IntegerField()
    status = models.TextField()
    lease_expires_at = models.DateTimeField(null=True)
    heartbeat_at = models.DateTimeField(null=True)
    runner_result_json = models.JSONField(null=True)
    runner_terminal_received_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = table("attempts_admin")
        verbose_name = "attempt"
        ordering = ["-created_at"]


class ReceiptRow(models.Model):
    admin_key = models.TextField(primary_key=True)
    run_id = models.TextField()
    key = models.TextField()
    status = models.TextField()
    lease_expires_at = models.DateTimeField(null=True)
    run_attempt = models.IntegerField(null=True)
    output_json = models.JSONField(null=True)
    error_json = models.JSONField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = table("receipts_admin")
        verbose_name = "receipt"
        ordering = ["-updated_at"]


class CleanupJobRow(models.Model):
    admin_key = models.TextField(primary_key=True)
    provider = models.TextField()
    sandbox_id = models.TextField()
    run_id = models.TextField()
    attempt = models.IntegerField()
    environment = models.TextField()
    routing_domain = models.TextField(null=True)
    status = models.TextField()
    attempt_count = models.IntegerField()
    failure_count = models.IntegerField()
    available_at = models.DateTimeField()
    lease_owner = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    last_error = models.TextField(null=True)
    blocked_at = models.DateTimeField(null=True)
    block_reason = models.TextField(null=True)
    deleted_at = models.DateTimeField(null=True)
    delete_confirmed_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        permissions = [("unblock_cleanup", "Can unblock a cleanup job (operator repair)"),
                       ("redrive_cleanup", "Can re-drive a waiting cleanup job now (operator repair)")]
        managed = False
        db_table = table("sandbox_cleanup_jobs_v2_admin")
        verbose_name = "cleanup job (v2)"
        ordering = ["-updated_at"]


class ScheduleFireRow(models.Model):
    """SCD-2's fires, keyed for the admin by schedule and slot."""

    admin_key = models.TextField(primary_key=True)
    schedule_id = models.TextField()
    slot_at = models.DateTimeField()
    run_id = models.TextField(null=True)
    outcome = models.TextField()
    error = models.TextField(null=True)
    fired_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = table("schedule_fires_admin")
        verbose_name = "schedule fire"
        ordering = ["-slot_at"]
        permissions = [("repair_schedule_fire", "Can fire a missed, skipped or refused slot again (audited)")]
