# Permissions of the release-admission and runner-lost repairs: options only, no schema change.

from django.db import migrations
from scheduler.schema.qualified import SchedulerMigration


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0018_runs_created_index'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='releaseadmission',
            options={'permissions': [('set_release_admission', "Can open or close a release's admission (operator repair)")]},
        ),
        migrations.AlterModelOptions(
            name='run',
            options={'permissions': [('cancel_run', 'Can cancel runs (operator repair)'), ('declare_runner_lost', "Can declare a parked run's runner lost (operator repair)")]},
        ),
    ]
