# APP-2: every scheduler model names its table with the configured schema, so the scheduler works whatever the
# user's search_path. Why safe during a deploy: the tables do not move (the renames are state only); each trigger is
# replaced in one transaction by the same trigger, its table now named with the schema (pgtrigger's hash changed).

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration, table

SCHEMA = f'"{scheduler_settings.schema}"'
IGNORE_FUNC = f"{SCHEMA}._pgtrigger_should_ignore"


class Migration(SchedulerMigration):

    dependencies = [
        ('scheduler', '0037_retention_open_obligation_indexes'),
    ]

    operations = [
        # State only: the tables stay where they are; only their names in the model state gain the schema.
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterModelTable(
                name='attempt',
                table=table("attempts"),
            ),
            migrations.AlterModelTable(
                name='attemptrow',
                table=table("attempts_admin"),
            ),
            migrations.AlterModelTable(
                name='billingitem',
                table=table("billing_items"),
            ),
            migrations.AlterModelTable(
                name='billingjob',
                table=table("compute_billing_jobs_v2"),
            ),
            migrations.AlterModelTable(
                name='cleanupevent',
                table=table("sandbox_cleanup_events_v2"),
            ),
            migrations.AlterModelTable(
                name='cleanupjob',
                table=table("sandbox_cleanup_jobs_v2"),
            ),
            migrations.AlterModelTable(
                name='cleanupjobrow',
                table=table("sandbox_cleanup_jobs_v2_admin"),
            ),
            migrations.AlterModelTable(
                name='controlkey',
                table=table("control"),
            ),
            migrations.AlterModelTable(
                name='laterunnerresult',
                table=table("late_runner_results"),
            ),
            migrations.AlterModelTable(
                name='legacycleanupjob',
                table=table("sandbox_cleanup_jobs"),
            ),
            migrations.AlterModelTable(
                name='operatoraction',
                table=table("operator_actions"),
            ),
            migrations.AlterModelTable(
                name='orgclaimturn',
                table=table("org_claim_turns"),
            ),
            migrations.AlterModelTable(
                name='orglimit',
                table=table("org_limits"),
            ),
            migrations.AlterModelTable(
                name='orgstart',
                table=table("org_starts"),
            ),
            migrations.AlterModelTable(
                name='outboxfact',
                table=table("outbox"),
            ),
            migrations.AlterModelTable(
                name='receipt',
                table=table("receipts"),
            ),
            migrations.AlterModelTable(
                name='receiptrow',
                table=table("receipts_admin"),
            ),
            migrations.AlterModelTable(
                name='releaseadmission',
                table=table("runtime_release_admission"),
            ),
            migrations.AlterModelTable(
                name='run',
                table=table("runs"),
            ),
            migrations.AlterModelTable(
                name='runledgerevent',
                table=table("run_ledger_events"),
            ),
            migrations.AlterModelTable(
                name='schedule',
                table=table("schedules"),
            ),
            migrations.AlterModelTable(
                name='schedulefire',
                table=table("schedule_fires"),
            ),
            migrations.AlterModelTable(
                name='schedulefirerow',
                table=table("schedule_fires_admin"),
            ),
            migrations.AlterModelTable(
                name='schemaversion',
                table=table("scheduler_schema_migrations"),
            ),
            migrations.AlterModelTable(
                name='wakesignal',
                table=table("wake_signals"),
            ),
        ]),
        pgtrigger.migrations.RemoveTrigger(
            model_name='attempt',
            name='finished_attempt_frozen',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='cleanupevent',
            name='cleanup_events_append_only',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='cleanupjob',
            name='tombstone_stays_deleted',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='cleanupjob',
            name='tombstone_kept',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='legacycleanupjob',
            name='tombstone_stays_deleted',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='legacycleanupjob',
            name='tombstone_kept',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='operatoraction',
            name='operator_actions_append_only',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='outboxfact',
            name='outbox_wake_drainers',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='receipt',
            name='completed_receipt_frozen',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='run',
            name='settled_run_releases_receipts',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='run',
            name='run_queued_wakes_dispatchers',
        ),
        pgtrigger.migrations.RemoveTrigger(
            model_name='run',
            name='terminal_run_status_frozen',
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='attempt',
            trigger=pgtrigger.compiler.Trigger(name='finished_attempt_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IN (\'completed\', \'failed\') AND (NEW."status" IS DISTINCT FROM (OLD."status") OR NEW."runner_result_json" IS DISTINCT FROM (OLD."runner_result_json")))', func="RAISE EXCEPTION 'attempt % of run % is % and cannot change its status or result', OLD.attempt, OLD.run_id, OLD.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='8c7100a9a2374853b9cbeb4578019fd3e17e258c', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_finished_attempt_frozen_a508b', table=table("attempts"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupevent',
            trigger=pgtrigger.compiler.Trigger(name='cleanup_events_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION 'sandbox_cleanup_events_v2 is append-only: % of event % refused', TG_OP, OLD.event_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='f098f994b5b344c964a2932426f9f23aa8e9a9d6', ignore_func_name=IGNORE_FUNC, operation='UPDATE OR DELETE', pgid='pgtrigger_cleanup_events_append_only_e29a1', table=table("sandbox_cleanup_events_v2"), when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_stays_deleted', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\' AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'sandbox_cleanup_jobs_v2 row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='f26102d9a6ed89cf4e9b2a6bdc936dfb3bba2172', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_tombstone_stays_deleted_c84cd', table=table("sandbox_cleanup_jobs_v2"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='cleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_kept', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\')', func="IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION 'sandbox_cleanup_jobs_v2 row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='4453934d677ef8f67c2e633eebf4ea2e57614c7b', ignore_func_name=IGNORE_FUNC, operation='DELETE', pgid='pgtrigger_tombstone_kept_c36b1', table=table("sandbox_cleanup_jobs_v2"), when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='legacycleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_stays_deleted', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\' AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'sandbox_cleanup_jobs row for sandbox % is deleted and cannot return to %', OLD.sandbox_id, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='2591f788342b59aff44f4d6ae06d619b1ff464e7', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_tombstone_stays_deleted_b7981', table=table("sandbox_cleanup_jobs"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='legacycleanupjob',
            trigger=pgtrigger.compiler.Trigger(name='tombstone_kept', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'deleted\')', func="IF TG_OP = 'DELETE' AND current_setting('scheduler.pruning', true) = 'on' THEN RETURN OLD; END IF; RAISE EXCEPTION 'sandbox_cleanup_jobs row for sandbox % is a deletion record and cannot be removed', OLD.sandbox_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='1119af252f28347a332a9aaf44718b55ec2f44d2', ignore_func_name=IGNORE_FUNC, operation='DELETE', pgid='pgtrigger_tombstone_kept_6912b', table=table("sandbox_cleanup_jobs"), when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='operatoraction',
            trigger=pgtrigger.compiler.Trigger(name='operator_actions_append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'operator_actions is append-only: % of action % refused', TG_OP, OLD.id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='892e111ea28f1b3eea6bce9673a5eaa4bb50d4c1', ignore_func_name=IGNORE_FUNC, operation='UPDATE OR DELETE', pgid='pgtrigger_operator_actions_append_only_e2ed8', table=table("operator_actions"), when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='outboxfact',
            trigger=pgtrigger.compiler.Trigger(name='outbox_wake_drainers', sql=pgtrigger.compiler.UpsertTriggerSql(func=f'IF EXISTS (SELECT 1 FROM inserted) THEN PERFORM {SCHEMA}.wake_listeners(\'outbox_wake\'); END IF; RETURN NULL;', hash='cb0f9deeb55e76b86929d6c26e91fee05e811b8e', ignore_func_name=IGNORE_FUNC, level='STATEMENT', operation='INSERT', pgid='pgtrigger_outbox_wake_drainers_edbaf', referencing='REFERENCING NEW TABLE AS inserted ', table=table("outbox"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='receipt',
            trigger=pgtrigger.compiler.Trigger(name='completed_receipt_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" = \'completed\' AND (NEW."status" IS DISTINCT FROM (OLD."status") OR NEW."output_json" IS DISTINCT FROM (OLD."output_json")))', func="RAISE EXCEPTION 'receipt % of run % is completed and keeps its output', OLD.key, OLD.run_id USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='6ecd871b4196685e428cf1e351714ee35da40fbe', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_completed_receipt_frozen_d8104', table=table("receipts"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='terminal_run_status_frozen', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (OLD."status" IN (\'completed\', \'failed\', \'cancelled\') AND NEW."status" IS DISTINCT FROM (OLD."status"))', func="RAISE EXCEPTION 'run % is % (terminal) and cannot change status to %', OLD.run_id, OLD.status, NEW.status USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;", hash='e4b0ad62cc56a97d5897e80b2d7c60aa07c549ef', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_terminal_run_status_frozen_4c740', table=table("runs"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='run_queued_wakes_dispatchers', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (NEW."status" = \'queued\')', func=f'PERFORM {SCHEMA}.wake_listeners(\'run_queued\'); RETURN NULL;', hash='70666c8b4e82be8124f4a94ffe8a4ee8879554a6', ignore_func_name=IGNORE_FUNC, operation='INSERT OR UPDATE', pgid='pgtrigger_run_queued_wakes_dispatchers_0b30d', table=table("runs"), when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='settled_run_releases_receipts', sql=pgtrigger.compiler.UpsertTriggerSql(condition='WHEN (NEW."status" IN (\'completed\', \'failed\', \'cancelled\') AND OLD."status" IS DISTINCT FROM (NEW."status"))', func=f'PERFORM {SCHEMA}.release_settled_receipts(NEW.run_id); RETURN NULL;', hash='94a2005a5e2e42b65193289d843ae4b7f8e76adb', ignore_func_name=IGNORE_FUNC, operation='UPDATE', pgid='pgtrigger_settled_run_releases_receipts_84e7f', table=table("runs"), when='AFTER')),
        ),
    ]
