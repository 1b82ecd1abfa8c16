"""List filters the dashboard's figures link to: stuck runs, failures by error code, outbox delivery state."""

from django.contrib import admin

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.history import pruning
from scheduler.kinds import HeldReason

# The stuck list shows at most this many runs (the dashboard's figure counts them all).
STUCK_LIMIT = 1000


class StuckFilter(admin.SimpleListFilter):
    """Runs whose parked runner is past its heartbeat timeout, or whose claim expired before it parked."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("runner", "runner past its heartbeat timeout"), ("claim", "claim past its lease")]

    def queryset(self, request, queryset):
        if self.value() not in ("runner", "claim"):
            return queryset
        stuck = db.fetch_all("runs_list_stuck", {"kind": self.value(), "limit": STUCK_LIMIT,
                                                 "default_timeout_ms": scheduler_settings.heartbeat_timeout_ms})
        return queryset.filter(run_id__in=[row["run_id"] for row in stuck])


class WaitingForFilter(admin.SimpleListFilter):
    """WAIT-7: runs waiting durably (sandbox released), by what they wait for."""

    title = "waiting durably for"
    parameter_name = "waiting_for"

    def lookups(self, request, model_admin):
        return [("event", "an event"), ("timer", "a time")]

    def queryset(self, request, queryset):
        if self.value() in ("event", "timer"):
            return queryset.filter(status="waiting", suspension_json__kind=self.value())
        return queryset


class ErrorCodeFilter(admin.SimpleListFilter):
    """Runs by the error code of their terminal result (the dashboard's failures link here)."""

    title = "error code"
    parameter_name = "error_code"

    def lookups(self, request, model_admin):
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(terminal_result_json__error__code=self.value())
        return queryset


class DeliveryFilter(admin.SimpleListFilter):
    """An outbox fact's delivery state."""

    title = "delivery"
    parameter_name = "delivery"

    def lookups(self, request, model_admin):
        return [("undelivered", "undelivered"), ("retrying", "retrying"), ("failed", "failed head"),
                ("delivered", "delivered")]

    def queryset(self, request, queryset):
        value = self.value()
        if value == "undelivered":
            return queryset.filter(delivered_at__isnull=True)
        if value == "retrying":
            return queryset.filter(delivered_at__isnull=True, failed_at__isnull=True, next_attempt_at__isnull=False)
        if value == "failed":
            return queryset.filter(delivered_at__isnull=True, failed_at__isnull=False)
        if value == "delivered":
            return queryset.filter(delivered_at__isnull=False)
        return queryset


class _JsonKeyFilter(admin.SimpleListFilter):
    """Filter on one key; offers the values of the newest runs (read off the created_at index, never the history)."""

    lookup: str = ""
    SAMPLE = 500

    def lookups(self, request, model_admin):
        newest = model_admin.model.objects.order_by("-created_at").values_list(self.lookup, flat=True)[:self.SAMPLE]
        values = sorted({value for value in newest if isinstance(value, str) and value})
        current = self.value()
        return [(value, value) for value in values + ([current] if current and current not in values else [])]

    def queryset(self, request, queryset):
        return queryset.filter(**{self.lookup: self.value()}) if self.value() else queryset


class ReleaseFilter(_JsonKeyFilter):
    title = "release"
    parameter_name = "release"
    lookup = "launch_json__absurdReleaseId"


class ProviderFilter(_JsonKeyFilter):
    title = "provider"
    parameter_name = "provider"
    lookup = "suspension_json__runtimeSandboxRef__provider"


class OrgFilter(_JsonKeyFilter):
    title = "org"
    parameter_name = "org"
    lookup = "org_id"


class TaskQueueFilter(_JsonKeyFilter):
    """TSK: the runs that are django.tasks tasks, by the queue they were enqueued on."""

    title = "task queue"
    parameter_name = "task_queue"
    lookup = "launch_json__play__queueName"


class HeldFilter(admin.SimpleListFilter):
    """RET-1: finished runs past retention that one obligation keeps (the oldest 1,000; the dashboard links here)."""

    title = "held past retention"
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [(reason.value, reason.value.replace("_", " ")) for reason in HeldReason]

    def queryset(self, request, queryset):
        if self.value() not in {reason.value for reason in HeldReason}:
            return queryset
        return queryset.filter(run_id__in=pruning.held_run_ids(HeldReason(self.value())))
