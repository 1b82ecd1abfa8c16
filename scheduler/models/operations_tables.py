"""The operators' audit trail: every repair, who ran it, on what, why, and what came of it."""

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from scheduler.models.invariants import SchemaTrigger, refuse
from scheduler.schema.qualified import table


class OperatorAction(models.Model):
    actor = models.TextField()
    action = models.TextField()
    target = models.TextField()
    reason = models.TextField(null=True)
    outcome = models.TextField()
    changed = models.BooleanField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("operator_actions")
        verbose_name = "operator action"
        triggers = [
            # The audit trail is append-only: a repair's record is never edited or removed.
            SchemaTrigger(
                name="operator_actions_append_only",
                operation=pgtrigger.Update | pgtrigger.Delete,
                when=pgtrigger.Before,
                func=refuse("'operator_actions is append-only: % of action % refused', TG_OP, OLD.id"),
            ),
        ]

    def __str__(self):
        return f"{self.action} {self.target} by {self.actor}: {self.outcome}"
