# The operators' audit trail and the permissions of the repairs. Why safe
# during a deploy: a new table with its append-only trigger and permission
# rows; no existing row, column or reader changes.

import django.db.models.functions.datetime
import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0015_late_runner_results'),
    ]

    operations = [
        migrations.CreateModel(
            name='OperatorAction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('actor', models.TextField()),
                ('action', models.TextField()),
                ('target', models.TextField()),
                ('reason', models.TextField(null=True)),
                ('outcome', models.TextField()),
                ('changed', models.BooleanField()),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'verbose_name': 'operator action',
                'db_table': 'operator_actions',
            },
        ),
        migrations.AlterModelOptions(
            name='cleanupjobrow',
            options={'managed': False, 'ordering': ['-updated_at'], 'permissions': [('unblock_cleanup', 'Can unblock a cleanup job (operator repair)')], 'verbose_name': 'cleanup job (v2)'},
        ),
        migrations.AlterModelOptions(
            name='outboxfact',
            options={'permissions': [('requeue_outbox_head', 'Can requeue a failed outbox head (operator repair)')], 'verbose_name': 'outbox fact'},
        ),
        migrations.AlterModelOptions(
            name='run',
            options={'permissions': [('cancel_run', 'Can cancel runs (operator repair)')]},
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='operatoraction',
            trigger=pgtrigger.compiler.Trigger(name='operator_actions_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'operator_actions is append-only: % of action % refused', TG_OP, OLD.id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='e4282ad3ab0810394e451f7b74b5ccbe5642e75e', ignore_func_name=IGNORE_FUNC, operation='UPDATE OR DELETE', pgid='pgtrigger_operator_actions_append_only_e2ed8', table='operator_actions', when='BEFORE')),
        ),
    ]
