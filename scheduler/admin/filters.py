"""List filters the dashboard's figures link to: stuck runs, failures by error code, outbox delivery state."""

from django.contrib import admin
from django.db.models.expressions import RawSQL

from scheduler.conf import scheduler_settings


class StuckFilter(admin.SimpleListFilter):
    """Runs whose parked runner is past its heartbeat timeout, or whose claim expired before it parked."""

    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return [("runner", "runner past its heartbeat timeout"), ("claim", "claim past its lease")]

    def queryset(self, request, queryset):
        if self.value() == "runner":
            return queryset.filter(run_id__in=RawSQL("""
                SELECT run.run_id FROM runs AS run
                JOIN attempts AS attempt
                  ON attempt.run_id = run.run_id AND to_jsonb(attempt.attempt) = run.suspension_json -> 'runnerAttempt'
                WHERE run.status = 'waiting' AND attempt.status = 'waiting' AND attempt.runner_result_json IS NULL
                  AND coalesce(attempt.heartbeat_at,
                               to_timestamp((run.suspension_json ->> 'startedAtMs')::double precision / 1000))
                      + coalesce((run.suspension_json ->> 'heartbeatTimeoutMs')::double precision, %s::double precision)
                        * interval '1 millisecond' < now()""", [scheduler_settings.heartbeat_timeout_ms]))
        if self.value() == "claim":
            return queryset.filter(run_id__in=RawSQL(
                "SELECT run_id FROM attempts WHERE status IN ('claimed', 'running') AND lease_expires_at < now()", []))
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
    """Filter on one key of a JSON column, offering the values the first rows show (bounded)."""

    lookup: str = ""

    def lookups(self, request, model_admin):
        seen = (model_admin.get_queryset(request).exclude(**{f"{self.lookup}__isnull": True})
                .values_list(self.lookup, flat=True).distinct()[:50])
        return [(value, value) for value in seen if value]

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
