# FSH-1..8: fair share at the claim. Three new tables (org limits, each org's turn, each rate-limited org's
# recent starts) and four nullable-or-defaulted columns on runs. Why safe during a deploy: new tables no older
# code reads; the columns are a catalog change (a constant default needs no rewrite), and older code's launches
# leave them at their defaults (priority 0, no key, no not-before), which the new claim reads as "no constraint";
# the two checks are added NOT VALID (no scan under the table lock) and validated without blocking writes.

import django.db.models.functions.datetime
from django.db import migrations, models
from scheduler.schema.qualified import SchedulerMigration

PRIORITY_CHECK = models.CheckConstraint(condition=models.Q(("priority__gte", -100), ("priority__lte", 100)),
                                        name="runs_priority_check")
CONCURRENCY_CHECK = models.CheckConstraint(
    condition=models.Q(("concurrency_key__isnull", True),
                       models.Q(("concurrency_limit__gte", 1), ("concurrency_limit__lte", 1000)), _connector="OR"),
    name="runs_concurrency_check")


def _check(name: str, sql: str) -> list:
    """A check added NOT VALID, then validated (SHARE UPDATE EXCLUSIVE: writes go on while it scans)."""
    return [
        migrations.RunSQL(f"ALTER TABLE runs ADD CONSTRAINT {name} CHECK ({sql}) NOT VALID",
                          f"ALTER TABLE runs DROP CONSTRAINT IF EXISTS {name}"),
        migrations.RunSQL(f"ALTER TABLE runs VALIDATE CONSTRAINT {name}", migrations.RunSQL.noop),
    ]


class Migration(SchedulerMigration):

    dependencies = [("scheduler", "0030_idempotency_index")]

    operations = [
        migrations.CreateModel(
            name="OrgClaimTurn",
            fields=[("org_id", models.TextField(primary_key=True, serialize=False)),
                    ("last_claimed_at", models.DateTimeField())],
            options={"db_table": "org_claim_turns"},
        ),
        migrations.CreateModel(
            name="OrgLimit",
            fields=[
                ("org_id", models.TextField(primary_key=True, serialize=False)),
                ("max_active", models.IntegerField(null=True)),
                ("max_starts_per_minute", models.IntegerField(null=True)),
                ("paused", models.BooleanField(db_default=False)),
                ("reason", models.TextField(null=True)),
                ("updated_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("updated_by", models.TextField(null=True)),
            ],
            options={"verbose_name": "org limits", "verbose_name_plural": "org limits", "db_table": "org_limits",
                     "permissions": [("change_org_limits", "Can change an org's limits and pause it (audited)")]},
        ),
        migrations.CreateModel(
            name="OrgStart",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("org_id", models.TextField()),
                ("run_id", models.TextField()),
                ("attempt", models.IntegerField()),
                ("claimed_at", models.DateTimeField()),
            ],
            options={"db_table": "org_starts",
                     "indexes": [models.Index(fields=["org_id", "claimed_at"], name="org_starts_window_idx")]},
        ),
        migrations.AddConstraint(
            model_name="orglimit",
            constraint=models.CheckConstraint(condition=models.Q(("max_active__gte", 0)),
                                              name="org_limits_max_active_check"),
        ),
        migrations.AddConstraint(
            model_name="orglimit",
            constraint=models.CheckConstraint(condition=models.Q(("max_starts_per_minute__gte", 0)),
                                              name="org_limits_max_starts_check"),
        ),
        migrations.AddField(model_name="run", name="priority", field=models.SmallIntegerField(db_default=0)),
        migrations.AddField(model_name="run", name="concurrency_key", field=models.TextField(null=True)),
        migrations.AddField(model_name="run", name="concurrency_limit", field=models.IntegerField(null=True)),
        migrations.AddField(model_name="run", name="run_after", field=models.DateTimeField(null=True)),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                *_check("runs_priority_check", "priority >= -100 AND priority <= 100"),
                *_check("runs_concurrency_check",
                        "concurrency_key IS NULL OR (concurrency_limit >= 1 AND concurrency_limit <= 1000)"),
            ],
            state_operations=[
                migrations.AddConstraint(model_name="run", constraint=PRIORITY_CHECK),
                migrations.AddConstraint(model_name="run", constraint=CONCURRENCY_CHECK),
            ],
        ),
    ]
