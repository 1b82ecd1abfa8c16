"""APP-4: the scheduler's HTTP surface for a project's URLconf: `path("", include("scheduler.urls"))`.

Serves /internal/... (the API of docs/api.md), /healthz and /metrics; a prefix
in the including `path` moves them all. The admin registers itself with the
project's admin site (scheduler/admin/).
"""

from django.urls import include, path

from scheduler.api.health import healthz
from scheduler.api.views_metrics import metrics

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("internal/", include("scheduler.api.routes")),
]
