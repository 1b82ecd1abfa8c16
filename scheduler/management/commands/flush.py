"""`flush`, emptying the scheduler's tables too (APP-2).

The scheduler's models name their tables with its schema, which Django's
introspection does not list (it sees only what the connection's search_path
shows), so Django's own flush, and with it every TransactionTestCase of a
user's suite, would leave the scheduler's rows behind. This command adds them
to the statements Django's flush runs, in the same transaction.
"""

from django.apps import apps
from django.core.management.commands import flush as django_flush

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import bare


def scheduler_tables(connection) -> list[str]:
    """The scheduler's managed tables that exist, as their models name them."""
    if connection.vendor != "postgresql":
        return []
    existing = {row["table_name"] for row in db.fetch_all("schema_tables", {"schema": scheduler_settings.schema},
                                                           using=connection.alias)}
    return sorted(model._meta.db_table for model in apps.get_app_config("scheduler").get_models()
                  if model._meta.managed and bare(model._meta.db_table) in existing)


class Command(django_flush.Command):
    def handle(self, **options):
        djangos = django_flush.sql_flush

        def with_scheduler_tables(style, connection, reset_sequences=True, allow_cascade=False):
            statements = djangos(style, connection, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
            return statements + connection.ops.sql_flush(style, scheduler_tables(connection),
                                                         reset_sequences=reset_sequences, allow_cascade=allow_cascade)

        django_flush.sql_flush = with_scheduler_tables
        try:
            return super().handle(**options)
        finally:
            django_flush.sql_flush = djangos
