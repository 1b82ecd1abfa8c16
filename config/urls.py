from django.contrib import admin
from django.urls import include, path

from scheduler.api.views_metrics import metrics
from scheduler.api.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("internal/", include("scheduler.api.urls")),
    path("admin/", admin.site.urls),
]
