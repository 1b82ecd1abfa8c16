# Dispatchers LISTEN for queued runs instead of waiting for their next poll.
# Why safe during a deploy: a new AFTER trigger that only notifies; no row,
# column or reader changes, and older workers simply never listen.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0013_outbox_fact_model")]

    operations = [
        pgtrigger.migrations.AddTrigger(
            model_name="run",
            trigger=pgtrigger.compiler.Trigger(
                name="run_queued_wakes_dispatchers",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (NEW.\"status\" = 'queued')",
                    func="PERFORM pg_notify(TG_TABLE_SCHEMA || '_run_queued', ''); RETURN NULL;",
                    hash="07318a02d1b263547c3f3e7b0844000390bf9767", ignore_func_name=IGNORE_FUNC,
                    operation="INSERT OR UPDATE", pgid="pgtrigger_run_queued_wakes_dispatchers_0b30d", table="runs",
                    when="AFTER",
                ),
            ),
        ),
    ]
