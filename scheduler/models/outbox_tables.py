"""The outbox (OBX-1..10) and the built-in run-ledger receiver's table."""

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from scheduler.kinds import Lane, values
from scheduler.models.invariants import SchemaTrigger, call
from scheduler.schema.qualified import table


class WakeSignal(models.Model):
    """Whether a listener of a wake channel is idle and wants a NOTIFY (armed), per channel.

    Why: a notifying transaction holds the cluster-wide notify lock until its commit is flushed, so notifying
    commits serialize. The wake triggers call wake_listeners(channel) (migration 0024): it disarms the signal
    and notifies only when a listener had armed it, so while the listeners are busy no commit notifies.
    """

    channel = models.TextField(primary_key=True)
    armed = models.BooleanField(db_default=True)
    armed_at = models.DateTimeField(null=True)

    class Meta:
        db_table = table("wake_signals")


class OutboxFact(models.Model):
    """One run fact on its way to the run ledger (requirements §1.3)."""

    event_id = models.TextField(primary_key=True)
    run_id = models.TextField()
    event_type = models.TextField()
    payload_json = models.JSONField(db_default={})
    lane = models.TextField(db_default="ledger")
    created_at = models.DateTimeField(db_default=Now())
    delivered_at = models.DateTimeField(null=True)
    lease_owner = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    next_attempt_at = models.DateTimeField(null=True)
    attempt_count = models.IntegerField(db_default=0)
    last_error = models.TextField(null=True)
    failed_at = models.DateTimeField(null=True)

    class Meta:
        db_table = table("outbox")
        verbose_name = "outbox fact"
        permissions = [("requeue_outbox_head", "Can requeue a failed outbox head (operator repair)")]
        constraints = [
            models.CheckConstraint(condition=models.Q(lane__in=values(Lane)), name="outbox_lane_check"),
        ]
        triggers = [
            # Wake idle drainers on new facts (LISTEN <schema>_outbox_wake); polling stays the fallback. Only a
            # statement that inserted facts, and only while a drainer armed the signal (see WakeSignal).
            SchemaTrigger(
                name="outbox_wake_drainers",
                level=pgtrigger.Statement,
                operation=pgtrigger.Insert,
                when=pgtrigger.After,
                referencing=pgtrigger.Referencing(new="inserted"),
                func="IF EXISTS (SELECT 1 FROM inserted) THEN " + call("wake_listeners", "'outbox_wake'")
                + " END IF; RETURN NULL;",
            ),
        ]


class RunLedgerEvent(models.Model):
    """The built-in run-ledger receiver (OBX-10): delivered facts, once per event id."""

    event_id = models.TextField(primary_key=True)
    run_id = models.TextField()
    event_type = models.TextField()
    occurred_at = models.DateTimeField()
    payload_json = models.JSONField(db_default={})
    received_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("run_ledger_events")
        verbose_name = "run ledger event (built-in receiver)"
