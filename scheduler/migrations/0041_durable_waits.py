# WAIT-1..3: the waits plays record and the events sent to runs; an attempt may end `suspended`; a function that
# reads, once the run's lock is held, what may end a wait (its event, a queued cancel). Why safe during a deploy: two
# new tables and a new function that older code never reads; the attempts' status check gains a value, replaced NOT VALID
# (a catalog change) and validated without blocking writes. Older code never writes `suspended`, and reads an attempt
# in it as one that is neither active nor a verdict, which it is.

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration, table

SCHEMA = f'"{scheduler_settings.schema}"'
# WAIT-2: PL/pgSQL, so never inlined, and VOLATILE: under READ COMMITTED each of its queries takes a fresh snapshot.
# A suspension that waited for the run's lock behind an event or a cancel reads them here, committed: its own
# statement's snapshot, taken before the wait, would miss them and leave the run waiting for what already came.
WAKERS = f'''
    CREATE OR REPLACE FUNCTION {SCHEMA}.wait_wakers(p_run_id text, p_event_name text)
    RETURNS jsonb
    LANGUAGE plpgsql VOLATILE
    AS $fn$
    BEGIN
        RETURN jsonb_build_object(
            'eventId', (SELECT sent.event_id FROM {SCHEMA}.run_events AS sent
                        WHERE sent.run_id = p_run_id AND sent.name = p_event_name AND sent.consumed_key IS NULL
                        ORDER BY sent.received_at, sent.event_id LIMIT 1),
            'cancel', (SELECT cancel.value_json FROM {SCHEMA}.control AS cancel
                       WHERE cancel.key = 'runtime_cancel:' || p_run_id));
    END
    $fn$
'''

ATTEMPT_STATUSES = ('claimed', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'released', 'suspended')
OLD_ATTEMPT_STATUSES = ATTEMPT_STATUSES[:-1]


def _status_check(statuses: tuple[str, ...]) -> str:
    listed = ", ".join(f"'{status}'" for status in statuses)
    return ("ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_status_check, "
            f"ADD CONSTRAINT attempts_status_check CHECK (status IN ({listed})) NOT VALID")


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0040_weighted_turns'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunEvent',
            fields=[
                ('pk', models.CompositePrimaryKey('run_id', 'event_id', blank=True, editable=False, primary_key=True, serialize=False)),
                ('event_id', models.TextField()),
                ('name', models.TextField()),
                ('payload_json', models.JSONField(null=True)),
                ('received_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('consumed_key', models.TextField(null=True)),
                ('consumed_at', models.DateTimeField(null=True)),
                ('run', models.ForeignKey(db_column='run_id', db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='events', to='scheduler.run')),
            ],
            options={
                'verbose_name': 'run event',
                'db_table': table("run_events"),
            },
        ),
        migrations.CreateModel(
            name='RunWait',
            fields=[
                ('pk', models.CompositePrimaryKey('run_id', 'key', blank=True, editable=False, primary_key=True, serialize=False)),
                ('key', models.TextField()),
                ('kind', models.TextField()),
                ('event_name', models.TextField(null=True)),
                ('deadline', models.DateTimeField(null=True)),
                ('attempt', models.IntegerField()),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('satisfied_at', models.DateTimeField(null=True)),
                ('run', models.ForeignKey(db_column='run_id', db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='waits', to='scheduler.run')),
            ],
            options={
                'verbose_name': 'durable wait',
                'db_table': table("run_waits"),
                'constraints': [
                    models.CheckConstraint(condition=models.Q(('kind__in', ('event', 'timer'))), name='run_waits_kind_check'),
                    models.CheckConstraint(condition=models.Q(('kind', 'timer'), ('event_name__isnull', False), _connector='OR'), name='run_waits_event_name_check'),
                ],
            },
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name='attempt', name='attempts_status_check'),
                migrations.AddConstraint(
                    model_name='attempt',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ATTEMPT_STATUSES)), name='attempts_status_check'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(_status_check(ATTEMPT_STATUSES), _status_check(OLD_ATTEMPT_STATUSES)),
                migrations.RunSQL("ALTER TABLE attempts VALIDATE CONSTRAINT attempts_status_check", migrations.RunSQL.noop),
            ]),
        migrations.RunSQL(WAKERS, f"DROP FUNCTION IF EXISTS {SCHEMA}.wait_wakers(text, text)"),
        # WAIT-7: the operator's repair that ends a durable wait now (a permission: state only).
        migrations.AlterModelOptions(
            name='run',
            options={'permissions': [('cancel_run', 'Can cancel runs (operator repair)'), ('declare_runner_lost', "Can declare a parked run's runner lost (operator repair)"), ('end_wait', "Can end a run's durable wait now (operator repair)")]},
        ),
    ]
