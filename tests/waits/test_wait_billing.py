"""BIL-1 on the paths that cancel a waiting run: its billing job is due when the sandbox's cleanup confirms, as a
settled run's is, not at once (looked at before that, the job would only be written back as waiting)."""

from __future__ import annotations

import datetime as dt

import pytest

from scheduler.cleanup import billing_sweep, obligations
from scheduler.runs import lifecycle
from tests import factories
from tests.cleanup.factories import event
from tests.factories import one
from tests.waits.conftest import begin, post_suspended, suspended_run

pytestmark = [pytest.mark.django_db, pytest.mark.requirement("BIL-1")]
ACCEPTED = dt.datetime(2026, 5, 1, 10, 0, tzinfo=dt.UTC)


def billing_job_waits_for_the_cleanup(run_id: str) -> None:
    """The job is not due before the recheck; the cleanup's confirmation makes it due, and it bills to the delete's
    acceptance."""
    assert one("SELECT available_at > now() + interval '29 seconds' FROM compute_billing_jobs_v2 WHERE run_id = %s",
               [run_id]) is True
    assert billing_sweep.run_once("biller").counts["claimed"] == 0
    jobs, _ = obligations.claim(["local"], "owner")
    [job] = [job for job in jobs if job.run_id == run_id]
    event(job.sandbox_id, "provider_delete_accepted", ACCEPTED, provider="local", run_id=run_id)
    assert obligations.complete(job, "owner", "deleted", None) == "completed"
    assert billing_sweep.run_once("biller").counts == {"claimed": 1, "finalized": 1, "waiting": 0, "billed": 1}
    assert one("SELECT billing_ended_at FROM billing_items WHERE run_id = %s", [run_id]) == ACCEPTED


def test_a_run_cancelled_while_it_waits__is_billed_when_its_sandbox_cleanup_confirms():
    parked = suspended_run()
    assert lifecycle.cancel_run(parked.run_id).cancelled_now
    billing_job_waits_for_the_cleanup(parked.run_id)


def test_a_run_whose_suspension_meets_a_queued_cancel__is_billed_when_its_sandbox_cleanup_confirms():
    parked = factories.parked_run()
    assert begin(parked).outcome == "suspend"
    assert lifecycle.cancel_run(parked.run_id).cancel_queued
    assert post_suspended(parked).run_status == "cancelled"
    billing_job_waits_for_the_cleanup(parked.run_id)
