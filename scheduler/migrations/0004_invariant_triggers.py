# The invariants the database holds itself (django-pgtrigger): terminal runs
# keep their status, finished attempts keep status and result, cleanup events
# are append-only, deleted cleanup rows stay deleted. Why safe during a
# deploy: CREATE OR REPLACE of functions and triggers, no table rewrite; the
# triggers only refuse writes that no correct writer makes.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

# Qualified with the configured schema so that writers with another
# search_path (draining old workers) still resolve it.
IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0003_scheduler_indexes")]

    operations = [
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupevent',
            trigger=pgtrigger.compiler.Trigger(name='cleanup_events_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'sandbox_cleanup_events_v2 is append-only: % of event % refused', TG_OP, OLD.event_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='5d3d84ffff4b0b50bb8a75afb83a588b1e8e5da1', ignore_func_name=IGNORE_FUNC, operation='UPDATE OR DELETE', pgid='pgtrigger_cleanup_events_append_only_e29a1', table='sandbox_cleanup_events_v2', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_stays_deleted', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\' AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'sandbox_cleanup_jobs_v2 row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='d88b175fb88fc733999369f72a0c5aaf62e1fdf3', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_tombstone_stays_deleted_c84cd', table='sandbox_cleanup_jobs_v2', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_kept', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\')', func="RAISE EXCEPTION 'sandbox_cleanup_jobs_v2 row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='cda26946cf01bd7eda361d12fe91df9e4799f042', ignore_func_name=IGNORE_FUNC, operation='DELETE', pgid='pgtrigger_tombstone_kept_c36b1', table='sandbox_cleanup_jobs_v2', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='legacycleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_stays_deleted', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\' AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'sandbox_cleanup_jobs row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='1fb49eb634cd503db7c4c21fbb761e3fc90e38fa', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_tombstone_stays_deleted_b7981', table='sandbox_cleanup_jobs', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='legacycleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_kept', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\')', func="RAISE EXCEPTION 'sandbox_cleanup_jobs row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='620807a51844be01260baa0b21f6c8e981ea6de7', ignore_func_name=IGNORE_FUNC, operation='DELETE', pgid='pgtrigger_tombstone_kept_6912b', table='sandbox_cleanup_jobs', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='terminal_run_status_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IN (\'completed\', \'failed\', \'cancelled\') AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'run % is % (terminal) and cannot change status to %', OLD.run_id, OLD.status, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='b138070d2bb2e3192bfc7949af1aa78798adc31e', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_terminal_run_status_frozen_4c740', table='runs', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='attempt',
            trigger=pgtrigger.compiler.Trigger(name='finished_attempt_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IN (\'completed\', \'failed\') AND (NEW."status" IS DISTINCT FROM (OLD."status") OR NEW."runner_result_json" IS DISTINCT FROM (OLD."runner_result_json")))', func="RAISE EXCEPTION 'attempt % of run % is % and cannot change its status or result', OLD.attempt, OLD.run_id, OLD.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='47f5e73b1f167c03695d2fa8ae0ef6a3daa56a46', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_finished_attempt_frozen_a508b', table='attempts', when='BEFORE')),
        ),
    ]
