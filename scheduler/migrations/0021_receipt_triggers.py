# RCP-1: a settled run releases its running receipts, and a completed receipt keeps its output.
# Why safe during a deploy: two new triggers, no table or column change. Older writers settle runs as before
# and the trigger releases their receipts too; the frozen-receipt trigger refuses only a write no correct
# writer makes (replacing a completed receipt's output).

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

SCHEMA = f'"{scheduler_settings.schema}"'
IGNORE_FUNC = f"{SCHEMA}._pgtrigger_should_ignore"
# A settled run's running receipts go back to queued. PL/pgSQL: each statement takes a fresh snapshot (so a
# claim that committed while the settlement waited on the run's lock is seen) and keeps its plan.
RELEASE_FUNCTION = f"""
    CREATE OR REPLACE FUNCTION {SCHEMA}.release_settled_receipts(p_run_id text) RETURNS void AS $fn$
    BEGIN
        UPDATE {SCHEMA}.receipts
        SET status = 'queued', lease_id = NULL, lease_expires_at = NULL, updated_at = now()
        WHERE run_id = p_run_id AND status = 'running';
    END;
    $fn$ LANGUAGE plpgsql
"""


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0020_redrive_permission")]

    operations = [
        migrations.RunSQL(RELEASE_FUNCTION,
                          reverse_sql=f"DROP FUNCTION IF EXISTS {SCHEMA}.release_settled_receipts(text)"),
        pgtrigger.migrations.AddTrigger(
            model_name="receipt",
            trigger=pgtrigger.compiler.Trigger(
                name="completed_receipt_frozen",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (OLD."status" = \'completed\' AND (NEW."status" IS DISTINCT FROM (OLD."status") '
                              'OR NEW."output_json" IS DISTINCT FROM (OLD."output_json")))',
                    func="RAISE EXCEPTION 'receipt % of run % is completed and keeps its output', OLD.key, OLD.run_id "
                         "USING ERRCODE = 'integrity_constraint_violation'; RETURN NULL;",
                    hash="9d581e1bfaed0a7fe36b225663686e394d496dd8", ignore_func_name=IGNORE_FUNC,
                    operation="UPDATE", pgid="pgtrigger_completed_receipt_frozen_d8104", table="receipts",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="run",
            trigger=pgtrigger.compiler.Trigger(
                name="settled_run_releases_receipts",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition='WHEN (NEW."status" IN (\'completed\', \'failed\', \'cancelled\') '
                              'AND OLD."status" IS DISTINCT FROM (NEW."status"))',
                    func=f"PERFORM {SCHEMA}.release_settled_receipts(NEW.run_id); RETURN NULL;",
                    hash="e46e58da966e90ff50c6bed86c3a6f9c083fc1b5", ignore_func_name=IGNORE_FUNC,
                    operation="UPDATE", pgid="pgtrigger_settled_run_releases_receipts_84e7f", table="runs",
                    when="AFTER",
                ),
            ),
        ),
    ]
