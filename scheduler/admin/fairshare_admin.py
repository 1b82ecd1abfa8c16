"""The org limits page (FSH-10): each org's cap, start rate and pause with its active and queued runs, editable
behind the change_org_limits permission; every change goes through the statement the API and the command use
(fairshare/limits.py), which writes its operator_actions row with it."""

from django import forms
from django.contrib import admin, messages

from scheduler import models
from scheduler.admin.registrations import audit_rows
from scheduler.fairshare import limits

PERMISSION = "scheduler.change_org_limits"


def _actor(request) -> str:
    return f"admin:{request.user.get_username()}"


def _set_paused(modeladmin, request, queryset, paused: bool):
    for row in queryset:
        _, changed = limits.change(row.org_id, limits.LimitsChange(paused=paused), actor=_actor(request),
                                   action="org_limits_pause" if paused else "org_limits_resume")
        modeladmin.message_user(request, f"{row.org_id}: {'paused' if paused else 'dispatching'}",
                                messages.SUCCESS if changed else messages.WARNING)


@admin.action(description="Pause the selected orgs (their queued runs stay queued)", permissions=["limits"])
def pause_orgs(modeladmin, request, queryset):
    _set_paused(modeladmin, request, queryset, True)


@admin.action(description="Resume the selected orgs", permissions=["limits"])
def resume_orgs(modeladmin, request, queryset):
    _set_paused(modeladmin, request, queryset, False)


class OrgLimitForm(forms.ModelForm):
    class Meta:
        model = models.OrgLimit
        fields = ("org_id", "max_active", "max_starts_per_minute", "weight", "paused", "reason")
        help_texts = {"max_active": "Most active runs; 0 holds everything; empty: SCHEDULER_ORG_MAX_ACTIVE.",
                      "max_starts_per_minute": "Most claims in any rolling minute; empty: no start rate.",
                      "weight": "Its share of the claims beside other backlogged orgs, relative to theirs (1..1000)."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("max_active", "max_starts_per_minute", "reason", "weight"):
            if name in self.fields:
                self.fields[name].required = False  # empty: no limit of the org's own (weight: 1)

    def clean(self):
        cleaned = super().clean()
        for name in ("max_active", "max_starts_per_minute"):
            if cleaned.get(name) is not None and cleaned[name] < 0:
                self.add_error(name, "must be 0 or more")
        if cleaned.get("weight") is not None and not limits.MIN_WEIGHT <= cleaned["weight"] <= limits.MAX_WEIGHT:
            self.add_error("weight", f"must be between {limits.MIN_WEIGHT} and {limits.MAX_WEIGHT}")
        return cleaned


@admin.register(models.OrgLimit)
class OrgLimitAdmin(admin.ModelAdmin):
    form = OrgLimitForm
    list_display = ("org_id", "paused", "max_active", "max_starts_per_minute", "weight", "active", "queued", "reason",
                    "updated_at", "updated_by")
    list_filter = ("paused",)
    search_fields = ("org_id",)
    actions = [pause_orgs, resume_orgs]
    readonly_fields = ("active", "queued", "updated_at", "updated_by", "changes")

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields + (("org_id",) if obj else ())

    def has_limits_permission(self, request):
        return request.user.has_perm(PERMISSION)

    def has_add_permission(self, request):
        return request.user.has_perm(PERMISSION)

    def has_change_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION)

    def has_delete_permission(self, request, obj=None):
        return False  # clearing every limit is a change like any other, and audited

    @admin.display(description="active runs")
    def active(self, obj):
        return limits.read(obj.org_id).active

    @admin.display(description="queued runs")
    def queued(self, obj):
        return limits.read(obj.org_id).queued

    @admin.display(description="changes (operator actions)")
    def changes(self, obj):
        return audit_rows(f"org:{obj.org_id}")

    def save_model(self, request, obj, form, change):
        """Through the audited statement, never the ORM: the claim reads the row the statement wrote."""
        wanted = limits.LimitsChange(max_active=obj.max_active, max_starts_per_minute=obj.max_starts_per_minute,
                                     paused=obj.paused, reason=obj.reason, weight=obj.weight or 1)
        limits.change(obj.org_id, wanted, actor=_actor(request))
