# v64 (SCH-2). Why safe during a deploy: ADD COLUMN IF NOT EXISTS with a
# constant default is a catalog-only change (no rewrite); existing runs read
# false and older workers, which never name the column, ignore it.

from django.db import migrations, models
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS array_input_started boolean NOT NULL DEFAULT false",
                    reverse_sql="ALTER TABLE runs DROP COLUMN IF EXISTS array_input_started",
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="run",
                    name="array_input_started",
                    field=models.BooleanField(db_default=False),
                ),
            ],
        ),
    ]
