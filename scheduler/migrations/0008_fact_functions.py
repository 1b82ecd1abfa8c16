# Two pure helpers the statements use. Why safe during a deploy: CREATE OR
# REPLACE FUNCTION of new names; no table is touched and older code never
# calls them.

from django.db import migrations
from scheduler.schema.qualified import SchedulerMigration

FUNCTIONS = [
    # OBX-1: the created_at of a run's next fact, strictly after every earlier
    # fact of that run even if the wall clock steps back; `step` orders
    # several facts written by one statement.
    """
    CREATE OR REPLACE FUNCTION next_fact_time(p_run_id text, p_step integer)
    RETURNS timestamptz
    LANGUAGE sql VOLATILE
    AS $fn$
        SELECT greatest(
                   clock_timestamp(),
                   coalesce(max(fact.created_at), '-infinity'::timestamptz) + interval '1 microsecond'
               ) + p_step * interval '1 microsecond'
        FROM outbox AS fact
        WHERE fact.run_id = p_run_id
    $fn$
    """,
    # TRM-5: a JSON value that is a non-negative integer within 2^53 - 1.
    """
    CREATE OR REPLACE FUNCTION runtime_json_is_count(value jsonb)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $fn$
        SELECT CASE
            WHEN jsonb_typeof(value) = 'number' THEN
                (value #>> '{}')::numeric >= 0
                AND (value #>> '{}')::numeric % 1 = 0
                AND (value #>> '{}')::numeric <= 9007199254740991
            ELSE false
        END
    $fn$
    """,
]


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0007_admin_views")]

    operations = [
        migrations.RunSQL(FUNCTIONS[0], reverse_sql="DROP FUNCTION IF EXISTS next_fact_time(text, integer)"),
        migrations.RunSQL(FUNCTIONS[1], reverse_sql="DROP FUNCTION IF EXISTS runtime_json_is_count(jsonb)"),
    ]
