from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Run scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.db.backends.signals import connection_created

        from scheduler.db import keep_values_out_of_server_log
        from scheduler.schema.pooling import check_pooled_session

        connection_created.connect(keep_values_out_of_server_log, dispatch_uid="scheduler.keep_values_out_of_server_log")
        connection_created.connect(check_pooled_session, dispatch_uid="scheduler.check_pooled_session")
