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
from scheduler.schema.qualified import SchedulerMigration

SCHEMA = f'"{scheduler_settings.schema}"'
IGNORE_FUNC = f"{SCHEMA}._pgtrigger_should_ignore"


# Disarm a signal and NOTIFY its channel only when a listener had armed it (PL/pgSQL: a kept plan).
WAKE_FUNCTION = f"""
    CREATE OR REPLACE FUNCTION {SCHEMA}.wake_listeners(p_signal text) RETURNS void AS $fn$
    BEGIN
        UPDATE {SCHEMA}.wake_signals SET armed = false WHERE channel = p_signal AND armed;
        IF FOUND THEN
            PERFORM pg_notify('{scheduler_settings.schema}_' || p_signal, '');
        END IF;
    END;
    $fn$ LANGUAGE plpgsql
"""
SIGNALS = "INSERT INTO wake_signals (channel, armed) VALUES ('outbox_wake', true), ('run_queued', true) ON CONFLICT DO NOTHING"
# The 0009 trigger's function (its trigger stays for older releases' shape checks): it no longer notifies.
QUIET_OLD_TRIGGER = """
    CREATE OR REPLACE FUNCTION pgtrigger_outbox_wake_drainers_2e61d() RETURNS TRIGGER AS $fn$
    BEGIN
        RETURN NULL;
    END;
    $fn$ LANGUAGE plpgsql
"""

class Migration(SchedulerMigration):

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
        migrations.RunSQL(WAKE_FUNCTION, reverse_sql=f"DROP FUNCTION IF EXISTS {SCHEMA}.wake_listeners(text)"),
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
            trigger=pgtrigger.compiler.Trigger(name='outbox_wake_drainers', sql=pgtrigger.compiler.UpsertTriggerSql(func=f"IF EXISTS (SELECT 1 FROM inserted) THEN PERFORM {SCHEMA}.wake_listeners('outbox_wake'); END IF; RETURN NULL;", hash='b9c82bbbcbd8908cbc34cacdb590d615cf25cc3e', ignore_func_name=IGNORE_FUNC, level='STATEMENT', operation='INSERT', pgid='pgtrigger_outbox_wake_drainers_edbaf', referencing='REFERENCING NEW TABLE AS inserted ', table='outbox', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='run_queued_wakes_dispatchers', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (NEW."status" = \'queued\')', func=f"PERFORM {SCHEMA}.wake_listeners('run_queued'); RETURN NULL;", hash='fd0ec72ebb1e45ea74e33916d47afdee74f3629b', ignore_func_name=IGNORE_FUNC, operation='INSERT OR UPDATE', pgid='pgtrigger_run_queued_wakes_dispatchers_0b30d', table='runs', when='AFTER')),
        ),
    ]
