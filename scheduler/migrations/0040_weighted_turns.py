# FSH-11: weighted fairness. Each org's weight (1..1000, default 1) and its virtual time in the turn. Why safe
# during a deploy: catalog-only column additions (a constant default, a nullable column); the weight's check is
# added NOT VALID and validated without blocking writes; older code never reads either and keeps ordering by
# last_claimed_at, which the new claim still writes.

from django.db import migrations, models

from scheduler.schema.qualified import SchedulerMigration

WEIGHT_CHECK = "org_limits_weight_check"


class Migration(SchedulerMigration):

    dependencies = [("scheduler", "0039_claim_key_indexes")]

    operations = [
        migrations.AddField(model_name="orglimit", name="weight", field=models.IntegerField(db_default=1)),
        migrations.AddField(model_name="orgclaimturn", name="virtual_pass", field=models.FloatField(null=True)),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddConstraint(
                model_name="orglimit",
                constraint=models.CheckConstraint(condition=models.Q(weight__gte=1, weight__lte=1000),
                                                  name=WEIGHT_CHECK))],
            database_operations=[
                migrations.RunSQL(f"ALTER TABLE org_limits ADD CONSTRAINT {WEIGHT_CHECK} "
                                  "CHECK (weight >= 1 AND weight <= 1000) NOT VALID",
                                  f"ALTER TABLE org_limits DROP CONSTRAINT IF EXISTS {WEIGHT_CHECK}"),
                migrations.RunSQL(f"ALTER TABLE org_limits VALIDATE CONSTRAINT {WEIGHT_CHECK}",
                                  migrations.RunSQL.noop),
            ]),
    ]
