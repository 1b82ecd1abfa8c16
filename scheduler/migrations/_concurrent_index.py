"""Build or drop one index CONCURRENTLY from a non-atomic migration.

A concurrent build that failed (a cancelled deploy, a timeout) leaves an
INVALID index that IF NOT EXISTS would silently keep; it is dropped and
rebuilt instead. Tables and indexes resolve in the connection's first
search_path schema, which is SCHEDULER_SCHEMA.
"""

from django.db import migrations


def _index_state(cursor, name: str):
    cursor.execute(
        """
        SELECT index.indisvalid
        FROM pg_index AS index
        JOIN pg_class AS relation ON relation.oid = index.indexrelid
        WHERE relation.relname = %s AND relation.relnamespace = current_schema()::regnamespace
        """,
        [name],
    )
    row = cursor.fetchone()
    return None if row is None else row[0]


def concurrent_index(name: str, create_sql: str) -> migrations.RunPython:
    """An operation that builds `name` with `create_sql` (CREATE INDEX CONCURRENTLY IF NOT EXISTS ...)."""

    def forwards(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            valid = _index_state(cursor, name)
            if valid:
                return
            if valid is False:
                cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
            cursor.execute(create_sql)

    def backwards(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')

    return migrations.RunPython(forwards, backwards, atomic=False, elidable=False)
