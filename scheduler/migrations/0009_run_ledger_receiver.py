# The built-in run-ledger receiver's table (OBX-10) and the trigger that wakes
# drainers on new facts. Why safe during a deploy: a new table and a
# statement-level AFTER INSERT trigger that only notifies; no existing row
# or reader changes.

import django.db.models.functions.datetime
import pgtrigger.compiler
import pgtrigger.migrations
from scheduler.conf import scheduler_settings
from django.db import migrations, models
from scheduler.schema.qualified import SchedulerMigration

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0008_fact_functions'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunLedgerEvent',
            fields=[
                ('event_id', models.TextField(primary_key=True, serialize=False)),
                ('run_id', models.TextField()),
                ('event_type', models.TextField()),
                ('occurred_at', models.DateTimeField()),
                ('payload_json', models.JSONField(db_default={})),
                ('received_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'verbose_name': 'run ledger event (built-in receiver)',
                'db_table': 'run_ledger_events',
            },
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='outboxevent',
            trigger=pgtrigger.compiler.Trigger(name='outbox_wake_drainers', sql=pgtrigger.compiler.UpsertTriggerSql(func="PERFORM pg_notify(TG_TABLE_SCHEMA || '_outbox_wake', ''); RETURN NULL;", hash='23af258c9e8b063d0d1556de7f9018c4639e782d', ignore_func_name=IGNORE_FUNC, level='STATEMENT', operation='INSERT', pgid='pgtrigger_outbox_wake_drainers_2e61d', table='outbox', when='AFTER')),
        ),
    ]
