"""Durable waits (WAIT-1..3): the waits a run's plays recorded, and the events sent to runs.

Written only by sql/waits.sql; the models give the admin and the schema check their shape.
"""

from django.db import models
from django.db.models.functions import Now

from scheduler.kinds import WaitKind, values
from scheduler.models.run_tables import Run
from scheduler.schema.qualified import table


class RunWait(models.Model):
    """WAIT-1, WAIT-2: one durable wait of a run, by the play's key: recorded once (kind, event name, deadline are
    the first attempt's, whatever a replay asks), satisfied once (its result is then the key's completed receipt)."""

    pk = models.CompositePrimaryKey("run_id", "key")
    run = models.ForeignKey(Run, models.DO_NOTHING, db_column="run_id", db_index=False, related_name="waits")
    key = models.TextField()
    kind = models.TextField()
    event_name = models.TextField(null=True)
    deadline = models.DateTimeField(null=True)
    attempt = models.IntegerField()
    created_at = models.DateTimeField(db_default=Now())
    satisfied_at = models.DateTimeField(null=True)

    class Meta:
        db_table = table("run_waits")
        verbose_name = "durable wait"
        constraints = [
            models.CheckConstraint(condition=models.Q(kind__in=values(WaitKind)), name="run_waits_kind_check"),
            models.CheckConstraint(condition=models.Q(kind=WaitKind.TIMER.value) | models.Q(event_name__isnull=False),
                                   name="run_waits_event_name_check"),
        ]

    def __str__(self):
        return f"{self.run_id} {self.key} ({self.kind})"


class RunEvent(models.Model):
    """WAIT-3: an event sent to a run, idempotent by its id; kept until a wait of its name consumes it."""

    pk = models.CompositePrimaryKey("run_id", "event_id")
    run = models.ForeignKey(Run, models.DO_NOTHING, db_column="run_id", db_index=False, related_name="events")
    event_id = models.TextField()
    name = models.TextField()
    payload_json = models.JSONField(null=True)
    received_at = models.DateTimeField(db_default=Now())
    consumed_key = models.TextField(null=True)
    consumed_at = models.DateTimeField(null=True)

    class Meta:
        db_table = table("run_events")
        verbose_name = "run event"

    def __str__(self):
        return f"{self.run_id} {self.name} ({self.event_id})"
