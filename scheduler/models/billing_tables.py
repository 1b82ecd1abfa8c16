"""Compute billing (BIL-1): jobs written by settlement, items written by finalization."""

from django.db import models
from django.db.models.functions import Now
from scheduler.schema.qualified import table


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
        db_table = table("compute_billing_jobs_v2")
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
        db_table = table("billing_items")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=("resource", "late_resource")), name="billing_items_kind_check"
            ),
            models.CheckConstraint(condition=models.Q(duration_ms__gte=0), name="billing_items_duration_check"),
        ]
