# RCP-1: a settled run releases its running receipts, and a completed receipt keeps its output.
# Why safe during a deploy: two new triggers, no table or column change. Older writers settle runs as before
# and the trigger releases their receipts too; the frozen-receipt trigger refuses only a write no correct
# writer makes (replacing a completed receipt's output).

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings

SCHEMA = f'"{scheduler_settings.schema}"'
IGNORE_FUNC = f"{SCHEMA}._pgtrigger_should_ignore"


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0020_redrive_permission")]

    operations = [
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
                    func=(f"UPDATE {SCHEMA}.receipts SET status = 'queued', lease_id = NULL, lease_expires_at = NULL, "
                          "updated_at = now() WHERE run_id = NEW.run_id AND status = 'running'; RETURN NULL;"),
                    hash="4fcac66fa227d1081d883b8171792e5daa70c75f", ignore_func_name=IGNORE_FUNC,
                    operation="UPDATE", pgid="pgtrigger_settled_run_releases_receipts_84e7f", table="runs",
                    when="AFTER",
                ),
            ),
        ),
    ]
