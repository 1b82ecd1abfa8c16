"""CLN-5 for a provider whose deletes finish later (Daytona): the acceptance and the next look in one statement."""

import pytest

from scheduler.cleanup import obligations, sandbox_sweep
from scheduler.providers.daytona import DaytonaProvider
from tests.cleanup.test_completion_and_billing import claimed_job, settled_run
from tests.factories import one, query
from tests.providers.fake_daytona import FakeDaytona

pytestmark = pytest.mark.django_db


def _events(run_id: str) -> list[str]:
    return [row[0] for row in query("SELECT event_type FROM sandbox_cleanup_events_v2 WHERE run_id = %s "
                                    "ORDER BY created_at, event_id", [run_id])]


@pytest.mark.requirement("CLN-5")
def test_an_accepted_daytona_delete__is_read_back_at_the_next_look_and_billed_to_its_acceptance():
    parked = settled_run(provider="daytona", routing_domain="org-a")
    sandbox_id = one("SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [parked.run_id])
    with FakeDaytona({"key-a": "org-a"}, gone_after_seconds=0.0) as fake:
        fake.add(sandbox_id, "org-a")
        provider = DaytonaProvider(fake.url, {"org-a": "key-a"}, timeout=5)
        first = sandbox_sweep.run_once(["daytona"], "owner", provider_for=lambda name: provider,
                                       readback_delay_ms=60_000)
        assert (first.counts["accepted"], first.counts["retried"], first.counts["confirmed"]) == (1, 1, 0)
        assert [method for method, _ in fake.requests] == ["DELETE"]  # no read-back bound to see it still there
        assert _events(parked.run_id) == ["provider_delete_requested", "provider_delete_accepted"]
        assert one("SELECT status = 'pending' AND lease_owner IS NULL AND available_at > now() + interval '50 s' "
                   "FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [parked.run_id])
        query("UPDATE sandbox_cleanup_jobs_v2 SET available_at = now()")
        second = sandbox_sweep.run_once(["daytona"], "owner", provider_for=lambda name: provider)
    assert second.counts["confirmed"] == 1
    accepted_ms = one("SELECT extract(epoch FROM created_at) * 1000 FROM sandbox_cleanup_events_v2 "
                      "WHERE run_id = %s AND event_type = 'provider_delete_accepted'", [parked.run_id])
    ended_ms = one("SELECT (runtime_resources_json -> 0 ->> 'billingEndedAt')::numeric FROM runs WHERE run_id = %s",
                   [parked.run_id])
    assert float(ended_ms) == pytest.approx(float(accepted_ms), abs=0.001)


@pytest.mark.requirement("CLN-5")
def test_an_acceptance_after_the_lease_was_lost__is_recorded_and_leaves_the_job_to_its_new_holder():
    settled_run(provider="daytona", routing_domain="org-a")
    job = claimed_job("daytona")
    query("UPDATE sandbox_cleanup_jobs_v2 SET lease_owner = 'another-worker'")
    assert obligations.accepted_look_later([job], "owner", 60_000) == [False]
    assert _events(job.run_id)[-1] == "provider_delete_accepted"
    assert one("SELECT lease_owner FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [job.run_id]) == "another-worker"
