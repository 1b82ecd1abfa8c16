"""CLN-6 in batches: one completion statement for a tick's confirmed deletes decides each as completing it alone
would, and two sandboxes of one run both end their billing."""

import datetime as dt

import pytest

from scheduler.cleanup import obligations, sandbox_sweep
from scheduler.providers.base import SandboxProvider
from tests.cleanup.factories import event, v2
from tests.cleanup.test_completion_and_billing import T1, settled_run
from tests.concurrency import threads
from tests.factories import loads, one, query

pytestmark = pytest.mark.django_db


def _two_sandbox_run():
    """A settled run that billed two sandboxes (say a start's half-made one and the one that ran)."""
    parked = settled_run()
    query("UPDATE runs SET runtime_resources_json = runtime_resources_json || "
          "'[{\"provider\": \"daytona\", \"sandboxId\": \"sb-second\", \"billingStartedAt\": 1}]'::jsonb "
          "WHERE run_id = %s", [parked.run_id])
    v2("sb-second", run_id=parked.run_id, routing_domain="org-a")
    return parked


def _claimed() -> dict[str, obligations.Job]:
    jobs, _ = obligations.claim(["daytona"], "owner")
    return {job.sandbox_id: job for job in jobs}


@pytest.mark.requirement("CLN-6")
def test_a_batch_with_a_stale_item__completes_the_others_and_refuses_that_one():
    both, lost, plain = _two_sandbox_run(), settled_run(), settled_run()
    jobs = _claimed()
    query("UPDATE sandbox_cleanup_jobs_v2 SET lease_owner = 'another-worker' WHERE run_id = %s", [lost.run_id])
    for offset, job in enumerate(jobs.values()):
        event(job.sandbox_id, "provider_delete_accepted", T1 + dt.timedelta(seconds=offset), run_id=job.run_id,
              routing_domain="org-a", routingDomain="org-a")
    first, second = jobs[both.sandbox_id], jobs["sb-second"]
    missing = obligations.Job("daytona", "sb-nowhere", plain.run_id, 1, first.environment, "org-a", 1, 0)
    batch = [obligations.Completion(job, "deleted", "org-a")
             for job in (first, jobs[lost.sandbox_id], missing, second, jobs[plain.sandbox_id])]

    assert obligations.complete_all(batch, "owner") == \
        ["completed", "lease_lost", "missing_obligation", "completed", "completed"]

    assert dict(query("SELECT sandbox_id, status FROM sandbox_cleanup_jobs_v2")) == {
        both.sandbox_id: "deleted", "sb-second": "deleted", lost.sandbox_id: "pending", plain.sandbox_id: "deleted"}
    ended = [resource.get("billingEndedAt") for resource in
             loads(one("SELECT runtime_resources_json FROM runs WHERE run_id = %s", [both.run_id]))]
    accepted = {job.sandbox_id: (T1 + dt.timedelta(seconds=offset)).timestamp() * 1000
                for offset, job in enumerate(jobs.values())}
    assert ended == [accepted[both.sandbox_id], accepted["sb-second"]]
    assert "billingEndedAt" not in loads(one("SELECT runtime_resources_json FROM runs WHERE run_id = %s",
                                             [lost.run_id]))[0]
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_confirmed'") == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.requirement("CLN-6")
def test_two_batches_of_the_same_jobs_in_opposite_orders__complete_each_once_without_a_deadlock():
    for _ in range(4):
        settled_run()
    batch = [obligations.Completion(job, "deleted", "org-a") for job in _claimed().values()]
    outcomes = threads.run_together(lambda: obligations.complete_all(batch, "owner"),
                                    lambda: list(reversed(obligations.complete_all(list(reversed(batch)), "owner"))))
    together = list(zip(*(outcome.get() for outcome in outcomes)))
    assert sorted(map(sorted, together)) == [["already_deleted", "completed"]] * 4
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_confirmed'") == 4


class _Gone(SandboxProvider):
    """A provider whose sandboxes are all gone already."""

    def delete(self, ref):
        from scheduler.providers import DeleteOutcome

        return DeleteOutcome.ALREADY_ABSENT

    def seen_domain(self, ref):
        return None


@pytest.mark.requirement("CLN-6")
def test_a_batch_that_fails__completes_each_job_alone(monkeypatch):
    for _ in range(3):
        settled_run()
    alone = obligations.complete_all

    def refuse_batches(completions, lease_owner):
        if len(completions) > 1:
            from django.db import DatabaseError

            raise DatabaseError("a batch went wrong")
        return alone(completions, lease_owner)

    monkeypatch.setattr(obligations, "complete_all", refuse_batches)
    tick = sandbox_sweep.run_once(["daytona"], "owner", provider_for=lambda name: _Gone())
    assert tick.counts["confirmed"] == 3
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE status = 'deleted'") == 3
