"""Schedules (SCD-1, SCD-2): cron schedules that launch runs, and one row per slot each one reached."""

from django.db import models
from django.db.models.functions import Now

from scheduler.kinds import FireOutcome, ScheduleCatchUp, ScheduleOverlap, values
from scheduler.schema.qualified import table


class Schedule(models.Model):
    schedule_id = models.TextField(primary_key=True)
    org_id = models.TextField()
    name = models.TextField()
    cron = models.TextField()
    timezone = models.TextField(db_default="UTC")
    launch_template = models.JSONField()
    overlap = models.TextField(db_default=ScheduleOverlap.ALLOW.value)
    catch_up = models.TextField(db_default=ScheduleCatchUp.LATEST.value)
    paused = models.BooleanField(db_default=False)
    next_fire_at = models.DateTimeField()
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("schedules")
        constraints = [
            models.UniqueConstraint(fields=["org_id", "name"], name="schedules_org_name_key"),
            models.CheckConstraint(condition=models.Q(overlap__in=values(ScheduleOverlap)),
                                   name="schedules_overlap_check"),
            models.CheckConstraint(condition=models.Q(catch_up__in=values(ScheduleCatchUp)),
                                   name="schedules_catch_up_check"),
        ]
        indexes = [models.Index(fields=["next_fire_at"], name="schedules_due_idx",
                                condition=models.Q(paused=False))]

    def __str__(self):
        return f"{self.org_id}/{self.name}"


class ScheduleFire(models.Model):
    pk = models.CompositePrimaryKey("schedule_id", "slot_at")
    schedule_id = models.TextField()
    slot_at = models.DateTimeField()
    run_id = models.TextField(null=True)
    outcome = models.TextField()
    error = models.TextField(null=True)
    fired_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = table("schedule_fires")
        constraints = [models.CheckConstraint(condition=models.Q(outcome__in=values(FireOutcome)),
                                              name="schedule_fires_outcome_check")]

    def __str__(self):
        return f"{self.schedule_id} at {self.slot_at:%Y-%m-%dT%H:%M:%SZ}: {self.outcome}"
