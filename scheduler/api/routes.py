from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from scheduler.api import (views_ledger, views_orgs, views_reads, views_receipts, views_releases, views_runner,
                           views_runs, views_schedules, views_waits)
from scheduler.api.http import not_found

urlpatterns = [
    path("runs", views_runs.runs),
    path("runs/<str:run_id>", views_runs.run_status),
    path("runs/<str:run_id>/cancel", views_runs.cancel),
    path("runs/<str:run_id>/events", views_waits.run_events),
    path("runs/<str:run_id>/array-input-intent", views_runs.array_input_intent),
    # The attempt is checked by the view (a JSON 400 naming it), not by a URL converter (an HTML 404).
    path("runs/<str:run_id>/attempts/<str:attempt>/standing", views_runs.attempt_standing),
    path("runs/<str:run_id>/attempts/<str:attempt>/liveness", views_reads.runner_liveness),
    path("runs/<str:run_id>/standing", views_runs.run_standing),
    path("runs/<str:run_id>/terminal-array-input-intent", views_reads.terminal_array_input_intent),
    path("runner-terminals", views_reads.recorded_terminals),
    path("runner/heartbeat", views_runner.heartbeat),
    path("runner/terminal", views_runner.runner_terminal),
    path("runner/waits/begin", views_waits.begin_wait),
    path("runner/receipts/claim", views_receipts.claim),
    path("runner/receipts/complete", views_receipts.complete),
    path("runner/receipts/fail", views_receipts.fail),
    path("runner/receipts/release", views_receipts.release),
    path("runner/receipts/skip", views_receipts.skip),
    path("runner/receipts/mark-queued", views_receipts.mark_queued),
    path("runner/receipts/heartbeat", views_receipts.heartbeat),
    path("releases/<str:release_id>/admission", views_releases.release_admission),
    path("orgs/<str:org_id>/limits", views_orgs.org_limits),
    path("schedules", views_schedules.schedules),
    path("schedules/<str:schedule_id>", views_schedules.schedule),
    path("schedules/<str:schedule_id>/pause", views_schedules.pause),
    path("schedules/<str:schedule_id>/resume", views_schedules.resume),
    path("run-ledger/events", views_ledger.run_ledger_events),
    # Last: every other path under /internal/ answers the JSON error shape.
    re_path(r"^(?P<unknown_path>.*)$", csrf_exempt(not_found)),
]
