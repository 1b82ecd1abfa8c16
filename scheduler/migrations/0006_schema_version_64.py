# SCH-1: record the deployment work as version 64. Why safe during a deploy:
# one idempotent insert; the marker is never a floor code refuses to run below.

from django.db import migrations
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0005_legacy_cleanup_pending_index")]

    operations = [
        migrations.RunSQL(
            "INSERT INTO scheduler_schema_migrations (version, description) "
            "VALUES (64, 'runs.array_input_started; optional legacy cleanup pending index') "
            "ON CONFLICT (version) DO NOTHING",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
