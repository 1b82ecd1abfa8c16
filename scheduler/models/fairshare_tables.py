"""Fair share (FSH-1, FSH-4, FSH-6, FSH-8): each org's limits, its turn at the claim, its recent starts."""

from django.db import models
from django.db.models.functions import Now
from scheduler.schema.qualified import table


class OrgLimit(models.Model):
    """FSH-1, FSH-6, FSH-8: an operator's limits on one org; an org without a row has the defaults."""

    org_id = models.TextField(primary_key=True)
    max_active = models.IntegerField(null=True)
    max_starts_per_minute = models.IntegerField(null=True)
    paused = models.BooleanField(db_default=False)
    # FSH-11: the org's share of the claims while it and others are backlogged, relative to theirs (1..1000).
    weight = models.IntegerField(db_default=1)
    reason = models.TextField(null=True)
    updated_at = models.DateTimeField(db_default=Now())
    updated_by = models.TextField(null=True)

    class Meta:
        db_table = table("org_limits")
        verbose_name = "org limits"
        verbose_name_plural = "org limits"
        permissions = [("change_org_limits", "Can change an org's limits and pause it (audited)")]
        constraints = [
            models.CheckConstraint(condition=models.Q(max_active__gte=0), name="org_limits_max_active_check"),
            models.CheckConstraint(condition=models.Q(max_starts_per_minute__gte=0),
                                   name="org_limits_max_starts_check"),
            models.CheckConstraint(condition=models.Q(weight__gte=1, weight__lte=1000), name="org_limits_weight_check"),
        ]

    def __str__(self):
        return self.org_id


class OrgClaimTurn(models.Model):
    """FSH-4, FSH-11: an org's place in the turn: its virtual time (`pass`: the claims it had, each 1/weight; the org
    furthest behind goes first) and when the claim last served (or passed over) it (what older releases order by)."""

    org_id = models.TextField(primary_key=True)
    last_claimed_at = models.DateTimeField()
    virtual_pass = models.FloatField(null=True)

    class Meta:
        db_table = table("org_claim_turns")


class OrgStart(models.Model):
    """FSH-6: one row per claim of an org that has a start rate, kept for the rolling minute it is counted in."""

    id = models.BigAutoField(primary_key=True)
    org_id = models.TextField()
    run_id = models.TextField()
    attempt = models.IntegerField()
    claimed_at = models.DateTimeField()

    class Meta:
        db_table = table("org_starts")
        indexes = [models.Index(fields=["org_id", "claimed_at"], name="org_starts_window_idx")]
