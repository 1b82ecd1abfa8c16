"""List columns an operator reads: run links, attempt n of max, error, ages, delivery state, times to the second."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html


def run_link(run_id: str | None):
    if not run_id:
        return "-"
    return format_html('<a href="{}">{}</a>', reverse("admin:scheduler_run_change", args=[quote(run_id)]), run_id)


def to_second(moment) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}"


def age(moment) -> str:
    if moment is None:
        return "-"
    seconds = (timezone.now() - moment).total_seconds()
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


class RunColumns:
    @admin.display(description="attempt")
    def attempt_of_max(self, obj):
        return f"{obj.last_attempt or 0} of {obj.max_attempts}"

    @admin.display(description="error")
    def error(self, obj):
        result = obj.terminal_result_json if isinstance(obj.terminal_result_json, dict) else {}
        error = result.get("error") or {}
        if not error:
            return "-"
        return f"{error.get('code', '?')}: {str(error.get('message', ''))[:80]}"

    @admin.display(description="heartbeat", ordering="last_heartbeat")
    def heartbeat_age(self, obj):
        return age(obj.last_heartbeat)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return to_second(obj.created_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished(self, obj):
        return to_second(obj.finished_at)


class RunLinkColumn:
    @admin.display(description="run", ordering="run_id")
    def run(self, obj):
        return run_link(obj.run_id)


class OutboxColumns(RunLinkColumn):
    @admin.display(description="delivery")
    def delivery(self, obj):
        if obj.delivered_at:
            return "delivered"
        return "failed head" if obj.failed_at else "retrying" if obj.next_attempt_at else "undelivered"

    @admin.display(description="last error")
    def error(self, obj):
        return (obj.last_error or "-")[:120]

    @admin.display(description="next attempt", ordering="next_attempt_at")
    def next_attempt(self, obj):
        return to_second(obj.next_attempt_at)


class CleanupColumns(RunLinkColumn):
    @admin.display(description="why")
    def why(self, obj):
        return (obj.block_reason or obj.last_error or "-")[:120]

    @admin.display(description="age", ordering="created_at")
    def job_age(self, obj):
        return age(obj.created_at)


def with_dates(value):
    """A copy of JSON `value` whose epoch-millisecond fields (`...AtMs`, `billingStartedAt`, ...) read as UTC dates."""
    if isinstance(value, dict):
        return {key: (_ms_to_date(item) if isinstance(key, str) and _is_epoch_ms_key(key) else with_dates(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [with_dates(item) for item in value]
    return value


def _is_epoch_ms_key(key: str) -> bool:
    return key.endswith("AtMs") or key in ("billingStartedAt", "billingEndedAt")


def _ms_to_date(value):
    import datetime as dt

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return f"{dt.datetime.fromtimestamp(value / 1000, dt.UTC):%Y-%m-%d %H:%M:%S.%f}"[:-3] + " UTC"
