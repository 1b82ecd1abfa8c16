# RET-1, RET-4: the tombstone and event-log guards let the retention prune delete (its transaction sets
# scheduler.pruning); every other delete is refused as before. Why safe during a deploy: one transaction replaces
# each trigger (no moment without it), and older code never deletes these rows.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0034_schedule_fires_admin'),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name='cleanupevent',
            name='cleanup_events_append_only',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='cleanupjob',
            name='tombstone_kept',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='legacycleanupjob',
            name='tombstone_kept',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupevent',
            trigger=pgtrigger.compiler.Trigger(name='cleanup_events_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION 'sandbox_cleanup_events_v2 is append-only: % of event % refused', TG_OP, OLD.event_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='abbc9545bbd90d59ddb77aa8dbed2d23b01bb989', ignore_func_name=IGNORE_FUNC, operation='UPDATE OR DELETE', pgid='pgtrigger_cleanup_events_append_only_e29a1', table='sandbox_cleanup_events_v2', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_kept', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\')', func="IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION 'sandbox_cleanup_jobs_v2 row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='5729550e1713525eaaa941298b37eb868c9828b1', ignore_func_name=IGNORE_FUNC, operation='DELETE', pgid='pgtrigger_tombstone_kept_c36b1', table='sandbox_cleanup_jobs_v2', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='legacycleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_kept', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\')', func="IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION 'sandbox_cleanup_jobs row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='dbbc42f92001d4add2859c236981fd831699ae57', ignore_func_name=IGNORE_FUNC, operation='DELETE', pgid='pgtrigger_tombstone_kept_6912b', table='sandbox_cleanup_jobs', when='BEFORE')),
        ),
    ]
