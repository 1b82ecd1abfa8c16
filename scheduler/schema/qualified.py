"""APP-2: the scheduler names its own schema, so it works whatever the user's search_path is.

Models carry a fully quoted `"schema"."table"` as db_table (Django and
django-pgtrigger pass a quoted name through unchanged, and Django's index
names are still derived from the bare table name, so an existing
deployment's indexes keep their names). The scheduler's migrations run as
`SchedulerMigration`: for the duration of each one, the scheduler schema is
put first on the connection's search_path, so every table, index, function
and trigger those migrations create lands in it, whatever the user's
connection options; Django's own apps migrate with the user's path untouched.
"""

from __future__ import annotations

from django.db import migrations

from scheduler.conf import scheduler_settings


def table(name: str) -> str:
    """The db_table of a scheduler model: its name in the scheduler schema, quoted."""
    return f'"{scheduler_settings.schema}"."{name}"'


def bare(db_table: str) -> str:
    """A scheduler model's table name without its schema (as the catalog lists it)."""
    from django.db.backends.utils import split_identifier

    return split_identifier(db_table)[1]


class SchedulerMigration(migrations.Migration):
    """A migration of the scheduler app: applied and unapplied with the scheduler schema first on search_path."""

    def apply(self, project_state, schema_editor, collect_sql=False):
        with schema_first(schema_editor, collect_sql):
            return super().apply(project_state, schema_editor, collect_sql)

    def unapply(self, project_state, schema_editor, collect_sql=False):
        with schema_first(schema_editor, collect_sql):
            return super().unapply(project_state, schema_editor, collect_sql)


class schema_first:
    """Put the scheduler schema first on search_path; put the user's path back afterwards.

    Inside a migration's transaction the change is SET LOCAL (a failed
    migration's rollback undoes it too); a non-atomic migration (a concurrent
    index build) changes the session and restores it when done.
    """

    def __init__(self, schema_editor, collect_sql: bool):
        self.connection = schema_editor.connection
        self.skip = collect_sql or self.connection.vendor != "postgresql"
        self.previous = None

    def __enter__(self):
        if self.skip:
            return self
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('search_path')")
            self.previous = cursor.fetchone()[0]
            scope = "LOCAL" if self.connection.in_atomic_block else "SESSION"
            # The user's own path follows, so Django's tables (django_migrations, content types) are still found.
            cursor.execute(f'SET {scope} search_path TO "{scheduler_settings.schema}", {self.previous or "public"}')
        return self

    def __exit__(self, kind, error, traceback):
        if self.skip or self.connection.in_atomic_block:
            return False
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT set_config('search_path', %s, false)", [self.previous])
        return False
