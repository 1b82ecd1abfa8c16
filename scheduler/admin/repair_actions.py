"""Admin actions: the operator repairs (scheduler/operations/repairs.py), each behind its own permission."""

from django.contrib import admin, messages

from scheduler.operations import repairs


def _report(modeladmin, request, done: list[repairs.Repair]) -> None:
    for repair in done:
        modeladmin.message_user(request, repair.line(), messages.SUCCESS if repair.changed else messages.WARNING)


def _actor(request) -> str:
    return f"admin:{request.user.get_username()}"


@admin.action(description="Cancel the selected runs", permissions=["cancel"])
def cancel_runs(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.cancel_run(run.run_id, _actor(request), "admin action")
                                  for run in queryset])


@admin.action(description="Requeue the selected failed heads", permissions=["requeue"])
def requeue_failed_heads(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.requeue_outbox_head(fact.event_id, _actor(request), "admin action")
                                  for fact in queryset])


@admin.action(description="Unblock the selected cleanup jobs", permissions=["unblock"])
def unblock_cleanup_jobs(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.unblock_cleanup(job.provider, job.sandbox_id, job.routing_domain,
                                                          _actor(request), "admin action")
                                  for job in queryset])


@admin.action(description="Declare the selected runs' runners lost", permissions=["declare_lost"])
def declare_runners_lost(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.declare_runner_lost(run.run_id, _actor(request), "admin action")
                                  for run in queryset])


@admin.action(description="Close the selected admission keys (at their epoch)", permissions=["admission"])
def close_releases(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.set_release_admission(row.release_id, False, row.admission_epoch, None,
                                                                _actor(request), "admin action")
                                  for row in queryset])


@admin.action(description="Open the selected admission keys (at their epoch)", permissions=["admission"])
def open_releases(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.set_release_admission(row.release_id, True, row.admission_epoch, None,
                                                                _actor(request), "admin action")
                                  for row in queryset])


@admin.action(description="Re-drive the selected pending cleanup jobs now", permissions=["redrive"])
def redrive_cleanup_jobs(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.redrive_cleanup(job.provider, job.sandbox_id, job.routing_domain,
                                                          _actor(request), "admin action")
                                  for job in queryset])


@admin.action(description="End the selected runs' durable waits now (they resume, timed out)", permissions=["end_wait"])
def end_waits(modeladmin, request, queryset):
    _report(modeladmin, request, [repairs.end_wait(run.run_id, _actor(request), "admin action") for run in queryset])
