# Late runner results: a terminal that arrives after a verdict settled its
# attempt is kept beside it. Why safe during a deploy: a new table; no
# existing row, column or reader changes, and the code that writes or reads
# it works on a schema without it (it skips the late result).

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0014_run_queued_wake'),
    ]

    operations = [
        migrations.CreateModel(
            name='LateRunnerResult',
            fields=[
                ('pk', models.CompositePrimaryKey('run_id', 'attempt', blank=True, editable=False, primary_key=True, serialize=False)),
                ('attempt', models.IntegerField()),
                ('result_json', models.JSONField()),
                ('received_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('run', models.ForeignKey(db_column='run_id', db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='late_results', to='scheduler.run')),
            ],
            options={
                'verbose_name': 'late runner result',
                'db_table': 'late_runner_results',
            },
        ),
    ]
