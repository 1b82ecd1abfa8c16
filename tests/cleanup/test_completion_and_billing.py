"""CLN-5..7 completion outcomes, backoff and blocking; BIL-1 billing with late resources."""

import datetime as dt
import json

import pytest

from scheduler.cleanup import billing_sweep, obligations, sandbox_sweep
from scheduler.providers import ProviderError, ReadBack
from scheduler.providers.base import SandboxProvider
from tests import factories
from tests.cleanup.factories import event, legacy, v2
from tests.factories import loads, one, query

pytestmark = pytest.mark.django_db
T1 = dt.datetime(2026, 5, 1, 10, 0, tzinfo=dt.UTC)


def settled_run(provider="daytona", routing_domain="org-a", launch=None):
    parked = factories.parked_run(provider=provider, routing_domain=routing_domain, launch=launch or {})
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    return parked


def claimed_job(provider="daytona"):
    jobs, _ = obligations.claim([provider], "owner")
    assert len(jobs) == 1
    return jobs[0]


def test_completion__completed_at_the_first_acceptance_with_billing_end_and_confirmation():
    parked = settled_run()
    job = claimed_job()
    event(job.sandbox_id, "provider_delete_accepted", T1 + dt.timedelta(seconds=3), run_id=job.run_id, routing_domain="org-a", routingDomain="org-a")
    event(job.sandbox_id, "provider_delete_accepted", T1, run_id=job.run_id, routing_domain="org-a", routingDomain="org-a")
    # CLN-5: readable between claims, the first by time.
    assert obligations.read_acceptance(job.identity()) == obligations.Acceptance(T1.timestamp() * 1000, "org-a")
    assert obligations.complete(job, "owner", "deleted", "org-a") == "completed"
    status, deleted_at, confirmed_at = one("SELECT status, deleted_at, delete_confirmed_at FROM sandbox_cleanup_jobs_v2")
    assert (status, deleted_at) == ("deleted", T1) and confirmed_at > T1
    resources = loads(one("SELECT runtime_resources_json FROM runs WHERE run_id = %s", [parked.run_id]))
    assert resources[0]["billingEndedAt"] == int(T1.timestamp() * 1000)
    details = loads(one("SELECT details_json FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_confirmed'"))
    assert details == {"providerOutcome": "deleted", "routingDomain": "org-a"}


@pytest.mark.requirement("CLN-5")
def test_completion__billing_ends_at_the_acceptance_to_the_microsecond__and_bills_from_it():
    """CLN-5: billingEndedAt keeps the acceptance's sub-millisecond part (no rounding to whole milliseconds)."""
    parked = settled_run()
    job = claimed_job()
    accepted = T1 + dt.timedelta(microseconds=123_456)
    event(job.sandbox_id, "provider_delete_accepted", accepted, run_id=job.run_id, routing_domain="org-a",
          routingDomain="org-a")
    assert obligations.complete(job, "owner", "deleted", "org-a") == "completed"
    [resource] = loads(one("SELECT runtime_resources_json FROM runs WHERE run_id = %s", [parked.run_id]))
    assert resource["billingEndedAt"] == pytest.approx(T1.timestamp() * 1000 + 123.456, abs=1e-6)
    assert resource["billingEndedAt"] != int(resource["billingEndedAt"])
    assert billing_sweep.run_once("biller").counts["finalized"] == 1
    assert one("SELECT billing_ended_at FROM billing_items WHERE run_id = %s", [parked.run_id]) == accepted


def test_completion__without_acceptance__now_and_legacy_row_completed_for_daytona():
    parked = settled_run()
    legacy(parked.sandbox_id, run_id=parked.run_id, routing_domain="org-a")
    query("UPDATE sandbox_cleanup_jobs SET status = 'pending'")
    job = claimed_job()
    assert obligations.complete(job, "owner", "already_absent", "org-a") == "completed"
    assert one("SELECT status FROM sandbox_cleanup_jobs") == "deleted"


@pytest.mark.requirement("CLN-6")
def test_completion__a_null_domain_job_the_provider_names__settles_its_null_domain_legacy_row_too():
    """CLN-6: the legacy (v12) row is matched by the confirmation's original routing domain (null here), not by
    the domain the provider's answer filled into the tombstone."""
    parked = settled_run(routing_domain=None)
    legacy(parked.sandbox_id, run_id=parked.run_id, routing_domain=None)
    job = claimed_job()
    assert job.routing_domain is None
    assert obligations.complete(job, "owner", "deleted", "org-a") == "completed"
    assert query("SELECT routing_domain, status FROM sandbox_cleanup_jobs_v2") == [("org-a", "deleted")]
    assert query("SELECT routing_domain, status FROM sandbox_cleanup_jobs") == [(None, "deleted")]


def test_completion__already_deleted_lease_lost_missing_and_wrong_domain():
    parked = settled_run()
    job = claimed_job()
    assert obligations.complete(job, "another-owner", "deleted") == "lease_lost"
    wrong = obligations.Job(job.provider, job.sandbox_id, job.run_id, job.attempt, job.environment, "org-z", 1, 0)
    assert obligations.complete(wrong, "owner", "deleted") == "wrong_routing_domain"
    missing = obligations.Job(job.provider, "sb-nowhere", job.run_id, job.attempt, job.environment, "org-a", 1, 0)
    assert obligations.complete(missing, "owner", "deleted") == "missing_obligation"
    assert obligations.complete(job, "owner", "deleted") == "completed"
    assert obligations.complete(job, "owner", "deleted") == "already_deleted"
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_confirmed'") == 1
    # The refused completions ended nothing; the one that completed ended the run's billing once.
    [resource] = loads(one("SELECT runtime_resources_json FROM runs WHERE run_id = %s", [parked.run_id]))
    assert isinstance(resource["billingEndedAt"], (int, float))


def test_completion__null_routing_domain_filled_from_the_observed_one():
    v2("sb-n", provider="daytona", run_id="run-n", routing_domain=None)
    job = claimed_job()
    assert obligations.complete(job, "owner", "deleted", "org-seen") == "completed"
    assert one("SELECT routing_domain FROM sandbox_cleanup_jobs_v2") == "org-seen"


class FlakyProvider(SandboxProvider):
    def __init__(self, error):
        self.error = error

    def delete(self, ref):
        raise self.error

    def read_back(self, ref):
        return ReadBack.UNKNOWN


@pytest.mark.requirement("CLN-7")
def test_failures__back_off_then_block_past_the_limit__permanent_blocks_at_once__unblock():
    v2("sb-f", provider="local", run_id="run-f")
    result = sandbox_sweep.run_once(["local"], "owner", provider_for=lambda name: FlakyProvider(ProviderError("503")))
    assert result.counts["retried"] == 1
    status, failures, available = one("SELECT status, failure_count, available_at > now() FROM sandbox_cleanup_jobs_v2")
    assert (status, failures, available) == ("pending", 1, True)
    query("UPDATE sandbox_cleanup_jobs_v2 SET available_at = now(), failure_count = 7")
    sandbox_sweep.run_once(["local"], "owner", provider_for=lambda name: FlakyProvider(ProviderError("503")))
    assert one("SELECT status, block_reason FROM sandbox_cleanup_jobs_v2") == ("blocked", "503")
    assert obligations.unblock("local", "sb-f", None) is True
    assert one("SELECT status, failure_count FROM sandbox_cleanup_jobs_v2") == ("pending", 0)
    result = sandbox_sweep.run_once(["local"], "owner",
                                    provider_for=lambda name: FlakyProvider(ProviderError("no key", permanent=True)))
    assert result.counts["blocked"] == 1
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_failed'") == 3


@pytest.mark.requirement("CLN-7")
def test_failures__a_rate_limit_retry_after_is_the_earliest_retry():
    """Daytona answers 429 with Retry-After: the backoff never retries sooner (first failure backs off 5..10 s)."""
    v2("sb-r", provider="local", run_id="run-r")
    limited = ProviderError("Daytona rate-limited delete", retry_after=900)
    assert sandbox_sweep.run_once(["local"], "owner", provider_for=lambda name: FlakyProvider(limited)).counts["retried"] == 1
    assert one("SELECT available_at >= now() + interval '899 seconds' FROM sandbox_cleanup_jobs_v2") is True


def billed_run(resources, timeout_seconds=600):
    run_id = factories.launch(launch={"contractSnapshot": {"sandbox": {"timeoutSeconds": timeout_seconds}}})
    query("UPDATE runs SET status = 'completed', runtime_resources_json = %s::jsonb WHERE run_id = %s",
          [json.dumps(resources), run_id])
    query("INSERT INTO compute_billing_jobs_v2 (run_id) VALUES (%s)", [run_id])
    return run_id


START_MS = int(T1.timestamp() * 1000)


@pytest.mark.requirement("BIL-1")
def test_billing__a_run_settled_with_its_sandbox_billing__is_due_when_its_cleanup_confirms_not_before():
    """Issue 47: looked at before its cleanup confirmed, the job would only be written back as waiting."""
    parked = settled_run()
    assert billing_sweep.run_once("biller").counts["claimed"] == 0
    assert one("SELECT available_at > now() + interval '29 seconds' FROM compute_billing_jobs_v2") is True
    job = claimed_job()
    event(job.sandbox_id, "provider_delete_accepted", T1, run_id=job.run_id, routing_domain="org-a",
          routingDomain="org-a")
    assert obligations.complete(job, "owner", "deleted", "org-a") == "completed"
    assert billing_sweep.run_once("biller").counts == {"claimed": 1, "finalized": 1, "waiting": 0, "billed": 1}
    assert one("SELECT billing_ended_at FROM billing_items WHERE run_id = %s", [parked.run_id]) == T1


@pytest.mark.requirement("BIL-1")
def test_billing__a_run_settled_with_nothing_still_billing__is_due_at_once():
    parked = factories.parked_run(provider="local")
    query("UPDATE runs SET runtime_resources_json = '[]'::jsonb WHERE run_id = %s", [parked.run_id])
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert billing_sweep.run_once("biller").counts == {"claimed": 1, "finalized": 1, "waiting": 0, "billed": 0}


@pytest.mark.requirement("BIL-1")
def test_billing__ended_resources_billed_to_their_end_no_late_items():
    run_id = billed_run([{"provider": "local", "sandboxId": "sb", "billingStartedAt": START_MS, "billingEndedAt": START_MS + 42_000}])
    assert billing_sweep.run_once("owner").counts == {"claimed": 1, "finalized": 1, "waiting": 0, "billed": 1}
    assert query("SELECT kind, duration_ms FROM billing_items WHERE run_id = %s", [run_id]) == [("resource", 42_000)]
    assert one("SELECT count(*) FROM billing_items WHERE kind = 'late_resource'") == 0


def test_billing__late_resource_waits_then_billed_at_most_timeout_plus_grace():
    started = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=100)
    late = {"provider": "daytona", "sandboxId": "sb-late", "routingDomain": "org",
            "billingStartedAt": int(started.timestamp() * 1000)}
    run_id = billed_run([late], timeout_seconds=600)
    assert billing_sweep.run_once("owner").counts["waiting"] == 1  # 100 s in, the ceiling is 660 s
    assert one("SELECT count(*) FROM billing_items") == 0
    # It looks again within 30 s (its ceiling, 660 s after the start, is later).
    assert one("SELECT available_at <= clock_timestamp() + interval '30 seconds' AND available_at > now() "
               "FROM compute_billing_jobs_v2") is True
    after = started + dt.timedelta(days=3)
    assert billing_sweep.run_once("owner", now=after).counts["finalized"] == 1
    (adjustment, kind, duration), = query("SELECT adjustment_session_id, kind, duration_ms FROM billing_items")
    assert kind == "late_resource" and duration == 660_000
    assert adjustment.startswith(f"{run_id}:late-resource:") and len(adjustment.rsplit(":", 1)[1]) == 64
    assert billing_sweep.run_once("owner", now=after).counts["claimed"] == 0


def test_billing__a_worker_killed_holding_jobs__another_bills_them_once_their_lease_lapses():
    """An older release claimed with a lease, then finalized: one of its workers killed between the two leaves the
    job to its lease."""
    run_id = billed_run([{"provider": "local", "sandboxId": "sb", "billingStartedAt": START_MS, "billingEndedAt": START_MS + 5}])
    query("UPDATE compute_billing_jobs_v2 SET lease_owner = 'killed-worker', "
          "lease_expires_at = now() + interval '10 seconds' WHERE run_id = %s", [run_id])  # ... SIGKILL
    held, lapsed = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds) for seconds in (5, 11))
    assert billing_sweep.run_once("other", now=held).counts["claimed"] == 0
    assert billing_sweep.run_once("other", now=lapsed).counts == {"claimed": 1, "finalized": 1, "waiting": 0, "billed": 1}
    assert one("SELECT count(*) FROM billing_items WHERE run_id = %s", [run_id]) == 1


@pytest.mark.requirement("BIL-1")
def test_billing__finalizing_twice_bills_once():
    run_id = billed_run([{"provider": "local", "sandboxId": "sb", "billingStartedAt": START_MS, "billingEndedAt": START_MS + 1}])
    billing_sweep.run_once("owner")
    query("UPDATE compute_billing_jobs_v2 SET status = 'pending', finalized_at = NULL")
    billing_sweep.run_once("owner")
    assert one("SELECT count(*) FROM billing_items WHERE run_id = %s", [run_id]) == 1


@pytest.mark.requirement("CLN-5", "CLN-6")
def test_a_null_domain_daytona_job__learns_its_domain_from_the_providers_answer():
    """CLN-5/6: the observed domain is what Daytona said the sandbox belongs to, not the job's own (null) one."""
    from scheduler.providers.daytona import DaytonaProvider
    from tests.providers.fake_daytona import FakeDaytona

    with FakeDaytona({"key-default": "org-real"}) as fake:
        fake.add("sb-legacy", "org-real")
        provider = DaytonaProvider(fake.url, {"": "key-default"}, timeout=5)
        v2("sb-legacy", provider="daytona", run_id="run-l", routing_domain=None)
        for _ in range(3):  # delete accepted, then read back until the sandbox is gone
            sandbox_sweep.run_once(["daytona"], "owner", provider_for=lambda name: provider, readback_delay_ms=0)
            query("UPDATE sandbox_cleanup_jobs_v2 SET available_at = now(), lease_owner = NULL")
    assert one("SELECT status, routing_domain FROM sandbox_cleanup_jobs_v2") == ("deleted", "org-real")


def test_billing__a_cleanup_whose_nudge_a_waiting_decision_overwrote__billed_at_the_next_look_not_the_ceiling():
    """The race the chaos suite found: the billing statement read the run before the cleanup committed its
    billingEndedAt, then (after waiting for the job's row lock) replaced the cleanup's nudge of available_at with
    the ceiling. The job now looks again within 30 s, so the run is billed then, to the accepted delete."""
    started = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=100)
    late = {"provider": "local", "sandboxId": "sb-raced", "billingStartedAt": int(started.timestamp() * 1000)}
    run_id = billed_run([late], timeout_seconds=3600)
    assert billing_sweep.run_once("owner").counts["waiting"] == 1
    ended_ms = int(started.timestamp() * 1000) + 7_000
    query("UPDATE runs SET runtime_resources_json = jsonb_set(runtime_resources_json, '{0,billingEndedAt}', %s::jsonb) "
          "WHERE run_id = %s", [str(ended_ms), run_id])  # the cleanup's write, its nudge lost
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=31)
    assert billing_sweep.run_once("owner", now=later).counts["finalized"] == 1
    assert query("SELECT kind, duration_ms FROM billing_items WHERE run_id = %s", [run_id]) == [("resource", 7_000)]
