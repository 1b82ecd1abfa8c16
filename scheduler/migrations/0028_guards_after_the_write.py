# The update guards (a terminal run, a finished attempt, a completed receipt and a cleanup tombstone keep their
# status) run AFTER the row is written, not BEFORE. Why: a BEFORE row trigger makes PostgreSQL lock each row the
# statement updates before it evaluates the trigger's WHEN (a tuple lock with its own WAL record, about 15 µs), and
# these guards sit on the busiest updates (every heartbeat, park and settlement); an AFTER guard's error undoes the
# statement the same way. Why safe during a deploy: the same-named triggers are recreated in one transaction, so
# older releases' shape checks find them and no write goes unguarded.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0027_control_partial_indexes'),
    ]

    operations = [
        pgtrigger.migrations.RemoveTrigger(
            model_name='attempt',
            name='finished_attempt_frozen',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='cleanupjob',
            name='tombstone_stays_deleted',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='legacycleanupjob',
            name='tombstone_stays_deleted',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='receipt',
            name='completed_receipt_frozen',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='run',
            name='terminal_run_status_frozen',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='attempt',
            trigger=pgtrigger.compiler.Trigger(name='finished_attempt_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IN (\'completed\', \'failed\') AND (NEW."status" IS DISTINCT FROM (OLD."status") OR NEW."runner_result_json" IS DISTINCT FROM (OLD."runner_result_json")))', func="RAISE EXCEPTION 'attempt % of run % is % and cannot change its status or result', OLD.attempt, OLD.run_id, OLD.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='17d293a79175c587f1ba1bf2fea09b1d8785412b', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_finished_attempt_frozen_a508b', table='attempts', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_stays_deleted', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\' AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'sandbox_cleanup_jobs_v2 row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='82d74f932b686d3ed3c89865b9cf2983d07033e0', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_tombstone_stays_deleted_c84cd', table='sandbox_cleanup_jobs_v2', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='legacycleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_stays_deleted', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\' AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'sandbox_cleanup_jobs row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='352515b43a7062cd2d3f66fff187066ae43e6b6b', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_tombstone_stays_deleted_b7981', table='sandbox_cleanup_jobs', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='receipt',
            trigger=pgtrigger.compiler.Trigger(name='completed_receipt_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'completed\' AND (NEW."status" IS DISTINCT FROM (OLD."status") OR NEW."output_json" IS DISTINCT FROM (OLD."output_json")))', func="RAISE EXCEPTION 'receipt % of run % is completed and keeps its output', OLD.key, OLD.run_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='5577ab4349fcf6bce27307fe2a4e638a610f0e15', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_completed_receipt_frozen_d8104', table='receipts', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='terminal_run_status_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IN (\'completed\', \'failed\', \'cancelled\') AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'run % is % (terminal) and cannot change status to %', OLD.run_id, OLD.status, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='ca61fb2b502fff3bdcc9a5e50534399f6f49af0e', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_terminal_run_status_frozen_4c740', table='runs', when='AFTER')),
        ),
    ]
