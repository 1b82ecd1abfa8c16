"""Schedules in the admin (SCD-6, SCD-7): each schedule with its next five fire times and recent fires (linking
their runs), pause and resume as actions, and a fire's repair as an action on the fires list (audited)."""

import datetime as dt

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from scheduler import models
from scheduler.admin.registrations import ReadOnlyAdmin
from scheduler.operations import repairs
from scheduler.periodic import definitions


def _actor(request) -> str:
    return f"admin:{request.user.get_username()}"


@admin.action(description="Pause the selected schedules", permissions=["change_schedule"])
def pause_schedules(modeladmin, request, queryset):
    for row in queryset:
        changed = definitions.set_paused(row.schedule_id, True)
        modeladmin.message_user(request, f"{row}: paused", messages.SUCCESS if changed else messages.WARNING)


@admin.action(description="Resume the selected schedules (from their next slot)", permissions=["change_schedule"])
def resume_schedules(modeladmin, request, queryset):
    for row in queryset:
        changed = definitions.set_paused(row.schedule_id, False)
        modeladmin.message_user(request, f"{row}: resumed", messages.SUCCESS if changed else messages.WARNING)


@admin.action(description="Fire the selected slots again (missed, skipped or refused only)", permissions=["repair"])
def repair_fires(modeladmin, request, queryset):
    for fire in queryset:
        repair = repairs.repair_schedule_fire(fire.schedule_id, fire.slot_at, _actor(request), "admin action")
        modeladmin.message_user(request, repair.line(), messages.SUCCESS if repair.changed else messages.WARNING)


@admin.register(models.Schedule)
class ScheduleAdmin(ReadOnlyAdmin):
    list_display = ("name", "org_id", "cron", "timezone", "paused", "next_fire_at", "overlap", "catch_up")
    list_filter = ("paused", "overlap", "catch_up")
    search_fields = ("name", "org_id", "schedule_id")
    actions = [pause_schedules, resume_schedules]
    extra_readonly = ("next_five", "recent_fires")

    def has_change_schedule_permission(self, request):
        return request.user.has_perm("scheduler.change_schedule")

    @admin.display(description="next five fire times (UTC)")
    def next_five(self, obj):
        upcoming = definitions.preview({"cron": obj.cron, "timezone": obj.timezone}, 5, dt.datetime.now(dt.UTC))
        return format_html_join(", ", "{}", ((slot.strftime("%Y-%m-%d %H:%M"),) for slot in upcoming))

    @admin.display(description="recent fires")
    def recent_fires(self, obj):
        rows = definitions.recent_fires(obj.schedule_id)
        if not rows:
            return "-"
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{} {} {}</li>", (
            (fire["slot_at"].strftime("%Y-%m-%d %H:%M"), fire["outcome"],
             format_html('<a href="{}">{}</a>', reverse("admin:scheduler_run_change", args=[quote(fire["run_id"])]),
                         fire["run_id"]) if fire["run_id"] else fire["error"] or "")
            for fire in rows)))


@admin.register(models.ScheduleFireRow)
class ScheduleFireAdmin(ReadOnlyAdmin):
    list_display = ("schedule_id", "slot_at", "outcome", "run_id", "error", "fired_at")
    list_filter = ("outcome",)
    search_fields = ("schedule_id", "run_id")
    actions = [repair_fires]

    def has_repair_permission(self, request):
        return request.user.has_perm("scheduler.repair_schedule_fire")
