from django.contrib import admin
from django.urls import include, path

# The scheduler mounts as a user's project mounts it (APP-4).
urlpatterns = [
    path("", include("scheduler.urls")),
    path("admin/", admin.site.urls),
]
