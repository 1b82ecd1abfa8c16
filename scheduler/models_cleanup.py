"""Sandbox cleanup (legacy v12 and v2), cleanup events, compute billing.

Deleted cleanup rows are history (legacy) and tombstones (v2): the durable
fact that a sandbox is gone. The triggers keep them deleted and keep the
event log append-only.
"""

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from scheduler.models_runs import _raise

CLEANUP_STATUSES = ("pending", "blocked", "deleted")
PROVIDERS = ("daytona", "modal", "local")


def _tombstone_triggers(table: str) -> list:
    return [
        pgtrigger.Trigger(
            name="tombstone_stays_deleted",
            operation=pgtrigger.Update,
            when=pgtrigger.Before,
            condition=pgtrigger.Q(old__status="deleted") & pgtrigger.Q(new__status__df=pgtrigger.F("old__status")),
            func=_raise(f"'{table} row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status"),
        ),
        pgtrigger.Trigger(
            name="tombstone_kept",
            operation=pgtrigger.Delete,
            when=pgtrigger.Before,
            condition=pgtrigger.Q(old__status="deleted"),
            func=_raise(f"'{table} row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id"),
        ),
    ]


class CleanupJobFields(models.Model):
    sandbox_id = models.TextField()
    run_id = models.TextField()
    attempt = models.IntegerField()
    environment = models.TextField()
    routing_domain = models.TextField(null=True)
    status = models.TextField(db_default="pending")
    attempt_count = models.IntegerField(db_default=0)
    failure_count = models.IntegerField(db_default=0)
    available_at = models.DateTimeField(db_default=Now())
    lease_owner = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    last_error = models.TextField(null=True)
    blocked_at = models.DateTimeField(null=True)
    block_reason = models.TextField(null=True)
    deleted_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        abstract = True


class LegacyCleanupJob(CleanupJobFields):
    """v12 obligations, still written by draining old workers; adopted into v2."""

    sandbox_id = models.TextField(primary_key=True)

    class Meta:
        db_table = "sandbox_cleanup_jobs"
        verbose_name = "cleanup job (legacy v12)"
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=CLEANUP_STATUSES), name="sandbox_cleanup_jobs_status_check"),
        ]
        triggers = _tombstone_triggers("sandbox_cleanup_jobs")


class CleanupJob(CleanupJobFields):
    pk = models.CompositePrimaryKey("provider", "sandbox_id", "routing_domain_key")
    provider = models.TextField()
    # A generated column in the database (coalesce(routing_domain, '')); Django
    # cannot hold a GeneratedField in a composite key, so state sees plain text.
    routing_domain_key = models.TextField(editable=False)
    delete_confirmed_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "sandbox_cleanup_jobs_v2"
        verbose_name = "cleanup job"
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=CLEANUP_STATUSES), name="sandbox_cleanup_jobs_v2_status_check"),
            models.CheckConstraint(condition=models.Q(provider__in=PROVIDERS), name="sandbox_cleanup_jobs_v2_provider_check"),
        ]
        triggers = _tombstone_triggers("sandbox_cleanup_jobs_v2")


class CleanupEvent(models.Model):
    event_id = models.TextField(primary_key=True)
    provider = models.TextField()
    sandbox_id = models.TextField()
    run_id = models.TextField()
    attempt = models.IntegerField()
    routing_domain = models.TextField(null=True)
    event_type = models.TextField()
    details_json = models.JSONField(db_default={})
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "sandbox_cleanup_events_v2"
        constraints = [
            models.CheckConstraint(condition=models.Q(provider__in=PROVIDERS), name="sandbox_cleanup_events_v2_provider_check"),
        ]
        triggers = [
            # The event log is evidence for adoption and billing: append-only.
            pgtrigger.Trigger(
                name="cleanup_events_append_only",
                operation=pgtrigger.Update | pgtrigger.Delete,
                when=pgtrigger.Before,
                func=_raise("'sandbox_cleanup_events_v2 is append-only: % of event % refused', TG_OP, OLD.event_id"),
            ),
        ]


class BillingJob(models.Model):
    run_id = models.TextField(primary_key=True)
    status = models.TextField(db_default="pending")
    lease_owner = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    attempt_count = models.IntegerField(db_default=0)
    available_at = models.DateTimeField(db_default=Now())
    last_error = models.TextField(null=True)
    finalized_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "compute_billing_jobs_v2"
        verbose_name = "compute billing job"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=("pending", "finalized")), name="compute_billing_jobs_v2_status_check"
            ),
        ]


class BillingItem(models.Model):
    adjustment_session_id = models.TextField(primary_key=True)
    run_id = models.TextField()
    org_id = models.TextField(null=True)
    kind = models.TextField()
    provider = models.TextField()
    sandbox_id = models.TextField()
    routing_domain = models.TextField(null=True)
    billing_started_at = models.DateTimeField()
    billing_ended_at = models.DateTimeField()
    duration_ms = models.BigIntegerField()
    cpu = models.FloatField(null=True)
    memory_mb = models.IntegerField(null=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "billing_items"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=("resource", "late_resource")), name="billing_items_kind_check"
            ),
            models.CheckConstraint(condition=models.Q(duration_ms__gte=0), name="billing_items_duration_check"),
        ]
