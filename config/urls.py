from django.contrib import admin
from django.urls import include, path

from scheduler.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("internal/", include("scheduler.api.urls")),
    path("admin/", admin.site.urls),
]
