# The built-in run ledger drops the pattern-matching index Django made beside the event_id primary key (a text
# primary key gets a text_pattern_ops twin for LIKE 'x%' lookups). Why: nothing searches event ids by prefix,
# yet every stored event wrote an entry into it (about 0.45 KB of WAL per run of four facts). Why safe during a
# deploy: non-atomic, DROP INDEX CONCURRENTLY (no lock on readers or writers); no release reads through it and
# no shape check requires it; the reverse rebuilds it concurrently.

from django.db import migrations
from scheduler.schema.qualified import SchedulerMigration


def _like_index(schema_editor) -> str:
    # The name Django gave it: derived from the table and column, the same on every database.
    return schema_editor._create_index_name("run_ledger_events", ["event_id"], suffix="_like")


def drop(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{_like_index(schema_editor)}"')


def rebuild(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{_like_index(schema_editor)}" '
                       "ON run_ledger_events (event_id text_pattern_ops)")


class Migration(SchedulerMigration):
    atomic = False

    dependencies = [("scheduler", "0025_qualified_fact_time")]

    operations = [migrations.RunPython(drop, rebuild, atomic=False, elidable=False)]
