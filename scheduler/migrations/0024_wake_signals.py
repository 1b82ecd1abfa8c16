# Notifications off the commit path: the wake triggers NOTIFY only when a listener armed its wake signal (it
# does so when it goes idle), and the outbox trigger only for a statement that inserted facts. Why: a notifying
# transaction holds PostgreSQL's cluster-wide notify lock until its commit is flushed, so notifying commits
# serialize. Why safe during a deploy: a new table and the same-named triggers recreated in one transaction;
# the 0009 trigger that release 0013 kept beside its successor (for older schema checks, which look for it by
# name) stays, its function emptied. Older listeners do not arm: they are woken at most once, then poll.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models

from scheduler.conf import scheduler_settings

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'
SIGNALS = "INSERT INTO wake_signals (channel, armed) VALUES ('outbox_wake', true), ('run_queued', true) ON CONFLICT DO NOTHING"
# The 0009 trigger's function (its trigger stays for older releases' shape checks): it no longer notifies.
QUIET_OLD_TRIGGER = """
    CREATE OR REPLACE FUNCTION pgtrigger_outbox_wake_drainers_2e61d() RETURNS TRIGGER AS $fn$
    BEGIN
        RETURN NULL;
    END;
    $fn$ LANGUAGE plpgsql
"""

class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0023_liveness_deadline_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='WakeSignal',
            fields=[
                ('channel', models.TextField(primary_key=True, serialize=False)),
                ('armed', models.BooleanField(db_default=True)),
                ('armed_at', models.DateTimeField(null=True)),
            ],
            options={
                'db_table': 'wake_signals',
            },
        ),
        migrations.RunSQL(SIGNALS, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(QUIET_OLD_TRIGGER, reverse_sql=migrations.RunSQL.noop),
        pgtrigger.migrations.RemoveTrigger(
            model_name='outboxfact',
            name='outbox_wake_drainers',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='run',
            name='run_queued_wakes_dispatchers',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='outboxfact',
            trigger=pgtrigger.compiler.Trigger(name='outbox_wake_drainers', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM inserted) THEN DECLARE woke integer; BEGIN EXECUTE format('UPDATE %I.wake_signals SET armed = false WHERE channel = ''outbox_wake'' AND armed', TG_TABLE_SCHEMA); GET DIAGNOSTICS woke = ROW_COUNT; IF woke > 0 THEN PERFORM pg_notify(TG_TABLE_SCHEMA || '_outbox_wake', ''); END IF; END; END IF; RETURN NULL;", hash='c4dbb2164e99fe43834fc0a08a356262472d019f', ignore_func_name=IGNORE_FUNC, level='STATEMENT', operation='INSERT', pgid='pgtrigger_outbox_wake_drainers_edbaf', referencing='REFERENCING NEW TABLE AS inserted ', table='outbox', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='run_queued_wakes_dispatchers', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (NEW."status" = \'queued\')', func="DECLARE woke integer; BEGIN EXECUTE format('UPDATE %I.wake_signals SET armed = false WHERE channel = ''run_queued'' AND armed', TG_TABLE_SCHEMA); GET DIAGNOSTICS woke = ROW_COUNT; IF woke > 0 THEN PERFORM pg_notify(TG_TABLE_SCHEMA || '_run_queued', ''); END IF; END; RETURN NULL;", hash='a77646544537817fd4a1234a604d9d01d3d621e2', ignore_func_name=IGNORE_FUNC, operation='INSERT OR UPDATE', pgid='pgtrigger_run_queued_wakes_dispatchers_0b30d', table='runs', when='AFTER')),
        ),
    ]
