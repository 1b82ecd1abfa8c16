"""Sandbox cleanup obligations (legacy v12 and v2) and their events (CLN-1..7).

Deleted cleanup rows are history (legacy) and tombstones (v2): the durable
fact that a sandbox is gone. The triggers keep them deleted and keep the
event log append-only.
"""

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from scheduler.kinds import CleanupStatus, Provider, values
from scheduler.models.invariants import SchemaTrigger, PRUNING_MAY_DELETE, refuse
from scheduler.schema.qualified import table

CLEANUP_STATUSES = values(CleanupStatus)
PROVIDERS = values(Provider)


def _tombstone_triggers(table: str) -> list:
    return [
        SchemaTrigger(
            name="tombstone_stays_deleted",
            operation=pgtrigger.Update,
            when=pgtrigger.After,
            condition=pgtrigger.Q(old__status="deleted") & pgtrigger.Q(new__status__df=pgtrigger.F("old__status")),
            func=refuse(f"'{table} row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status"),
        ),
        SchemaTrigger(
            name="tombstone_kept",
            operation=pgtrigger.Delete,
            when=pgtrigger.Before,
            condition=pgtrigger.Q(old__status="deleted"),
            func=PRUNING_MAY_DELETE + refuse(f"'{table} row for sandbox % is a deletion record and cannot be removed', "
                                             "OLD.sandbox_id"),
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
        db_table = table("sandbox_cleanup_jobs")
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
        db_table = table("sandbox_cleanup_jobs_v2")
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
        db_table = table("sandbox_cleanup_events_v2")
        constraints = [
            models.CheckConstraint(condition=models.Q(provider__in=PROVIDERS), name="sandbox_cleanup_events_v2_provider_check"),
        ]
        triggers = [
            # The event log is evidence for adoption and billing: append-only.
            SchemaTrigger(
                name="cleanup_events_append_only",
                operation=pgtrigger.Update | pgtrigger.Delete,
                when=pgtrigger.Before,
                func=PRUNING_MAY_DELETE + refuse("'sandbox_cleanup_events_v2 is append-only: % of event % refused', "
                                                 "TG_OP, OLD.event_id"),
            ),
        ]
