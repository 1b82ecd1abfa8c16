"""Read-only ModelAdmins for the scheduler tables; secrets redacted."""

import json

from django.contrib import admin
from django.utils.html import format_html

from scheduler import models, replica
from scheduler.admin import columns, filters, repair_actions, run_story
from scheduler.cleanup import obligations
from scheduler.redaction import redact


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shows state; every change goes through the scheduler's statements."""

    list_per_page = 50

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.concrete_fields if f.column] + list(self.extra_readonly)

    extra_readonly = ()

    def changelist_view(self, request, extra_context=None):
        """RET-5: a list (a GET) reads the replica, rendered inside the block (querysets are lazy); an action (a
        POST) runs on the primary."""
        if request.method != "GET":
            return super().changelist_view(request, extra_context)
        with replica.replica_reads():
            response = super().changelist_view(request, extra_context)
            if hasattr(response, "render"):
                response.render()
            return response


def pretty_json(value) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, default=str))


def audit_rows(target: str):
    """The operator actions taken on `target`, oldest first."""
    rows = models.OperatorAction.objects.filter(target=target).order_by("created_at")
    audit = [{"at": row.created_at, "by": row.actor, "action": row.action, "outcome": row.outcome} for row in rows]
    return pretty_json(audit) if audit else "-"


@admin.register(models.Run)
class RunAdmin(columns.RunColumns, ReadOnlyAdmin):
    list_display = ("run_id", "status", "play_name", "org_id", "release_id", "attempt_of_max", "error", "heartbeat_age",
                    "created", "finished")
    list_filter = ("status", filters.WaitingForFilter, filters.StuckFilter, filters.ErrorCodeFilter, filters.OrgFilter, filters.ReleaseFilter,
                   filters.ProviderFilter, filters.TaskQueueFilter, filters.HeldFilter,
                   "play_name")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    search_fields = ("run_id", "org_id", "play_name")
    JSON_COLUMNS = ("launch_json", "input_json", "suspension_json", "terminal_result_json", "runtime_resources_json",
                    "runtime_timing_json")
    exclude = JSON_COLUMNS
    extra_readonly = ("story_attempts", "story_receipts", "story_waits", "story_facts", "story_cleanup", "story_billing", "story_ledger",
                      "launch_redacted", "input_redacted", "suspension", "terminal_result", "runtime_resources",
                      "late_results", "operator_actions")
    actions = [repair_actions.cancel_runs, repair_actions.declare_runners_lost, repair_actions.end_waits]

    def has_cancel_permission(self, request):
        return request.user.has_perm("scheduler.cancel_run")

    def has_declare_lost_permission(self, request):
        return request.user.has_perm("scheduler.declare_runner_lost")

    def has_end_wait_permission(self, request):
        return request.user.has_perm("scheduler.end_wait")

    def get_queryset(self, request):
        from django.db.models import Max

        return super().get_queryset(request).annotate(last_attempt=Max("attempts__attempt"),
                                                      last_heartbeat=Max("attempts__heartbeat_at"))

    @admin.display(description="attempts")
    def story_attempts(self, obj):
        return run_story.attempts(obj)

    @admin.display(description="work receipts (durable steps), in step order")
    def story_receipts(self, obj):
        return run_story.receipts(obj)

    @admin.display(description="durable waits and the events sent to the run")
    def story_waits(self, obj):
        return run_story.waits(obj)

    @admin.display(description="facts, in causal order, with their delivery")
    def story_facts(self, obj):
        return run_story.facts(obj)

    @admin.display(description="sandbox cleanup and its events")
    def story_cleanup(self, obj):
        return run_story.cleanup(obj)

    @admin.display(description="billing items")
    def story_billing(self, obj):
        return run_story.billing(obj)

    @admin.display(description="run ledger events (built-in receiver)")
    def story_ledger(self, obj):
        return run_story.ledger(obj)

    @admin.display(description="operator actions")
    def operator_actions(self, obj):
        return audit_rows(obj.run_id)

    def get_readonly_fields(self, request, obj=None):
        return [f for f in super().get_readonly_fields(request, obj) if f not in self.JSON_COLUMNS]

    STORY = ("story_attempts", "story_receipts", "story_waits", "story_facts", "story_cleanup", "story_billing", "story_ledger", "late_results",
             "operator_actions")

    def get_fieldsets(self, request, obj=None):
        """The story first, in order; the row's columns after it."""
        rest = [name for name in self.get_readonly_fields(request, obj) if name not in self.STORY]
        return [("What happened", {"fields": self.STORY}), ("The run's row", {"fields": rest})]

    @admin.display(description="release")
    def release_id(self, obj):
        return (obj.launch_json or {}).get("absurdReleaseId") if isinstance(obj.launch_json, dict) else None

    @admin.display(description="launch (secrets redacted)")
    def launch_redacted(self, obj):
        return pretty_json(redact(obj.launch_json))

    @admin.display(description="input (secrets redacted)")
    def input_redacted(self, obj):
        return pretty_json(redact(obj.input_json))

    @admin.display(description="suspension (times as dates)")
    def suspension(self, obj):
        return pretty_json(columns.with_dates(redact(obj.suspension_json)))

    @admin.display(description="terminal result")
    def terminal_result(self, obj):
        return pretty_json(redact(obj.terminal_result_json))

    @admin.display(description="runtime resources (billing times as dates)")
    def runtime_resources(self, obj):
        return pretty_json(columns.with_dates(obj.runtime_resources_json))

    @admin.display(description="finished after being declared lost")
    def late_results(self, obj):
        late = [{"attempt": row.attempt, "receivedAt": row.received_at, "result": redact(row.result_json)}
                for row in obj.late_results.order_by("attempt")]
        return pretty_json(late) if late else "-"


@admin.register(models.AttemptRow)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "attempt", "status", "heartbeat_at", "lease_expires_at", "finished_at")
    list_filter = ("status",)
    search_fields = ("run_id",)


@admin.register(models.OutboxFact)
class OutboxAdmin(columns.OutboxColumns, ReadOnlyAdmin):
    list_display = ("event_id", "run", "event_type", "lane", "delivery", "attempt_count", "error", "next_attempt",
                    "created_at", "delivered_at")
    actions = [repair_actions.requeue_failed_heads]
    extra_readonly = ("operator_actions",)

    @admin.display(description="operator actions")
    def operator_actions(self, obj):
        return audit_rows(obj.event_id)

    def has_requeue_permission(self, request):
        return request.user.has_perm("scheduler.requeue_outbox_head")
    list_filter = (filters.DeliveryFilter, "lane", "event_type")
    search_fields = ("run_id", "event_id")

    def get_queryset(self, request):
        # Failed heads first: they block their run's lane until requeued.
        from django.db.models import F

        return super().get_queryset(request).order_by(F("failed_at").desc(nulls_last=True), "-created_at")


@admin.register(models.ControlKey)
class ControlAdmin(ReadOnlyAdmin):
    list_display = ("key", "created_at")
    search_fields = ("key",)


@admin.register(models.ReleaseAdmission)
class ReleaseAdmissionAdmin(ReadOnlyAdmin):
    list_display = ("release_id", "accepting", "admission_epoch", "updated_at")
    actions = [repair_actions.close_releases, repair_actions.open_releases]

    def has_admission_permission(self, request):
        return request.user.has_perm("scheduler.set_release_admission")
    search_fields = ("release_id",)


@admin.register(models.ReceiptRow)
class ReceiptAdmin(ReadOnlyAdmin):
    list_display = ("run_link", "key", "status", "run_attempt", "lease", "updated_at")
    list_filter = ("status",)
    search_fields = ("run_id", "key")

    @admin.display(description="run")
    def run_link(self, obj):
        return run_story.run_link(obj.run_id)

    @admin.display(description="lease")
    def lease(self, obj):
        return run_story.lease_left(obj.status, obj.lease_expires_at)


@admin.register(models.CleanupJobRow)
class CleanupJobAdmin(columns.CleanupColumns, ReadOnlyAdmin):
    list_display = ("provider", "sandbox_id", "run", "attempt", "routing_domain", "status", "why", "job_age",
                    "attempt_count", "available_at")
    actions = [repair_actions.unblock_cleanup_jobs, repair_actions.redrive_cleanup_jobs]
    extra_readonly = ("first_accepted_delete", "operator_actions")

    @admin.display(description="first accepted delete (billing ends here)")
    def first_accepted_delete(self, obj):
        accepted = obligations.read_acceptance({"provider": obj.provider, "sandbox_id": obj.sandbox_id,
                                                "run_id": obj.run_id, "attempt": obj.attempt,
                                                "routing_domain": obj.routing_domain})
        if accepted is None:
            return "- (the provider has not accepted a delete yet)"
        return f"{columns.with_dates({'acceptedAtMs': accepted.accepted_at_ms})['acceptedAtMs']} " \
               f"for {accepted.organization_id or 'no organization'}"

    @admin.display(description="operator actions")
    def operator_actions(self, obj):
        return audit_rows(f"{obj.provider}:{obj.sandbox_id}:{obj.routing_domain or ''}")

    def has_unblock_permission(self, request):
        return request.user.has_perm("scheduler.unblock_cleanup")

    def has_redrive_permission(self, request):
        return request.user.has_perm("scheduler.redrive_cleanup")
    list_filter = ("status", "provider")
    search_fields = ("sandbox_id", "run_id")


@admin.register(models.LegacyCleanupJob)
class LegacyCleanupJobAdmin(ReadOnlyAdmin):
    list_display = ("sandbox_id", "run_id", "attempt", "routing_domain", "status", "available_at")
    list_filter = ("status",)
    search_fields = ("sandbox_id", "run_id")


@admin.register(models.CleanupEvent)
class CleanupEventAdmin(ReadOnlyAdmin):
    list_display = ("event_id", "event_type", "provider", "sandbox_id", "run_id", "attempt", "created_at")
    list_filter = ("event_type", "provider")
    search_fields = ("sandbox_id", "run_id")


@admin.register(models.BillingJob)
class BillingJobAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "status", "attempt_count", "available_at", "finalized_at")
    list_filter = ("status",)
    search_fields = ("run_id",)


@admin.register(models.BillingItem)
class BillingItemAdmin(ReadOnlyAdmin):
    list_display = ("adjustment_session_id", "run_id", "kind", "provider", "sandbox_id", "duration_ms")
    list_filter = ("kind", "provider")
    search_fields = ("run_id", "sandbox_id")


@admin.register(models.SchemaVersion)
class SchemaVersionAdmin(ReadOnlyAdmin):
    list_display = ("version", "applied_at", "description")


@admin.register(models.RunLedgerEvent)
class RunLedgerEventAdmin(ReadOnlyAdmin):
    list_display = ("event_id", "run_id", "event_type", "occurred_at", "received_at")
    list_filter = ("event_type",)
    search_fields = ("run_id", "event_id")


@admin.register(models.OperatorAction)
class OperatorActionAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "actor", "action", "target", "changed", "outcome", "reason")
    list_filter = ("action", "changed")
    search_fields = ("target", "actor")
