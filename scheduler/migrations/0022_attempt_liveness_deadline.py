# SWP-1: attempts.liveness_deadline, so liveness discovery costs what is stale, not what is parked.
# Why safe during a deploy: a nullable column without a default (catalog only, no rewrite). Older writers
# never set it and older readers never read it; new discovery treats NULL as "recheck" and, on a schema
# without the column, reads as before (reader-first).

from django.db import migrations, models
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0021_receipt_triggers")]

    operations = [
        migrations.AddField(model_name="attempt", name="liveness_deadline", field=models.DateTimeField(null=True)),
    ]
