# FSH-5: a launch may name an idempotency key; the run keeps the key and a digest of the launch body, so a repeat
# finds the first run and tells a same-body repeat from a conflicting one. Why safe during a deploy: two
# nullable columns without a default (a catalog change, no table rewrite); older code neither reads nor writes
# them, and its launches leave them null, outside the unique index (0030).

from django.db import migrations, models
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):

    dependencies = [("scheduler", "0028_guards_after_the_write")]

    operations = [
        migrations.AddField(model_name="run", name="idempotency_key", field=models.TextField(null=True)),
        migrations.AddField(model_name="run", name="idempotency_digest", field=models.TextField(null=True)),
    ]
