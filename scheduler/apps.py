from django.apps import AppConfig

# The models declare Meta.triggers, which django-pgtrigger's app module teaches Django to accept; imported here so a
# project that forgot "pgtrigger" in INSTALLED_APPS reaches `check`, which names it (scheduler/system_checks.py).
import pgtrigger.apps  # noqa: F401


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Run scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.db.backends.signals import connection_created

        from scheduler.db import keep_values_out_of_server_log
        from scheduler.schema.pooling import check_pooled_session
        import scheduler.system_checks  # noqa: F401 - registers the checks

        connection_created.connect(keep_values_out_of_server_log, dispatch_uid="scheduler.keep_values_out_of_server_log")
        connection_created.connect(check_pooled_session, dispatch_uid="scheduler.check_pooled_session")
