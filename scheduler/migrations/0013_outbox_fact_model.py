# One outbox row is a fact: the model's name says so. The table (`outbox`)
# keeps its name and columns. django-pgtrigger names a trigger after its
# model, so the wake trigger gets a new name; why safe during a deploy: the
# new trigger is added beside the old one (expand), which an older release's
# schema check still looks for and which a later release may drop
# (contract). Both notify the same channel, and PostgreSQL folds identical
# notifications of one transaction into one.

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

from scheduler.conf import scheduler_settings
from scheduler.schema.qualified import SchedulerMigration

IGNORE_FUNC = f'"{scheduler_settings.schema}"._pgtrigger_should_ignore'

WAKE_TRIGGER = pgtrigger.compiler.Trigger(
    name="outbox_wake_drainers",
    sql=pgtrigger.compiler.UpsertTriggerSql(
        func="PERFORM pg_notify(TG_TABLE_SCHEMA || '_outbox_wake', ''); RETURN NULL;",
        hash="021ce273d057958e8a16a367b20370d7da60b364", ignore_func_name=IGNORE_FUNC, level="STATEMENT",
        operation="INSERT", pgid="pgtrigger_outbox_wake_drainers_edbaf", table="outbox", when="AFTER",
    ),
)


class Migration(SchedulerMigration):
    dependencies = [("scheduler", "0012_outbox_autovacuum")]

    operations = [
        migrations.RenameModel("OutboxEvent", "OutboxFact"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                pgtrigger.migrations.RemoveTrigger(model_name="outboxfact", name="outbox_wake_drainers"),
                pgtrigger.migrations.AddTrigger(model_name="outboxfact", trigger=WAKE_TRIGGER),
            ],
            database_operations=[
                # Only the new trigger is installed; the old one stays for releases that still expect it.
                pgtrigger.migrations.AddTrigger(model_name="outboxfact", trigger=WAKE_TRIGGER),
            ],
        ),
    ]
