from django.urls import path

from scheduler.api import views_ledger, views_releases, views_runner, views_runs

urlpatterns = [
    path("runs", views_runs.launch),
    path("runs/<str:run_id>", views_runs.run_status),
    path("runs/<str:run_id>/cancel", views_runs.cancel),
    path("runs/<str:run_id>/array-input-intent", views_runs.array_input_intent),
    path("runs/<str:run_id>/attempts/<int:attempt>/standing", views_runs.attempt_standing),
    path("runner/heartbeat", views_runner.heartbeat),
    path("runner/terminal", views_runner.runner_terminal),
    path("releases/<str:release_id>/admission", views_releases.release_admission),
    path("run-ledger/events", views_ledger.run_ledger_events),
]
