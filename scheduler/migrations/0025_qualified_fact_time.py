# The fact-time helper names its table with the configured schema. Why: a session behind a transaction pooler
# may resolve names with another search_path (PgBouncer refuses the startup option that sets ours), and the
# helper must still read this schema's outbox. Why safe during a deploy: CREATE OR REPLACE of the same
# signature and the same result; older statements call it unchanged.

from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

SCHEMA = f'"{scheduler_settings.schema}"'


def fact_time(table: str) -> str:
    return f"""
    CREATE OR REPLACE FUNCTION {SCHEMA}.next_fact_time(p_run_id text, p_step integer)
    RETURNS timestamptz
    LANGUAGE sql VOLATILE
    AS $fn$
        SELECT greatest(
                   clock_timestamp(),
                   coalesce(max(fact.created_at), '-infinity'::timestamptz) + interval '1 microsecond'
               ) + p_step * interval '1 microsecond'
        FROM {table} AS fact
        WHERE fact.run_id = p_run_id
    $fn$
    """


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0024_wake_signals'),
    ]

    operations = [
        migrations.RunSQL(fact_time(f"{SCHEMA}.outbox"), reverse_sql=fact_time("outbox")),
    ]
