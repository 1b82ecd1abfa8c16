"""Django admin for the scheduler: a dashboard, read-only views of every table, and the operator repairs as
actions (scheduler/operations/) behind their own permissions; nothing else writes."""

from django.contrib import admin

from scheduler.admin import dashboard, fairshare_admin, registrations, schedules_admin  # noqa: F401

dashboard.install(admin.site)
