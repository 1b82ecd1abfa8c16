"""CLN-2, CLN-3: the preflight and the adoption repair, case by case; CLN-4: the claim after them."""

import datetime as dt

import pytest

from scheduler.cleanup import obligations
from tests import factories
from tests.cleanup.factories import event, legacy, legacy_rows, v2, v2_rows
from tests.factories import loads, one, query

pytestmark = pytest.mark.django_db
T1 = dt.datetime(2026, 5, 1, 10, 0, tzinfo=dt.UTC)
T2 = T1 + dt.timedelta(minutes=5)
T3 = T1 + dt.timedelta(minutes=9)


@pytest.mark.requirement("CLN-3")
def test_a__null_domain_duplicate_settled_at_the_earliest_confirmation():
    v2("sb-1", routing_domain=None)
    v2("sb-1", routing_domain="org-a", status="deleted")  # tombstone with the observed domain, no deleted_at
    event("sb-1", "provider_delete_confirmed", T2, providerOutcome="deleted", routingDomain="org-a")
    event("sb-1", "provider_delete_confirmed", T1, providerOutcome="deleted", routingDomain="org-a")
    event("sb-1", "provider_delete_confirmed", T1 - dt.timedelta(hours=1), providerOutcome="deleted", routingDomain="org-b")
    assert obligations.adopt()["settled_duplicates"] == 1
    assert v2_rows() == [("daytona", "sb-1", None, "deleted", T1), ("daytona", "sb-1", "org-a", "deleted", None)]


def test_b__legacy_proven_by_a_v2_tombstone__deleted_at_the_tombstones_time_and_not_copied():
    legacy("sb-2", routing_domain="org-a")
    v2("sb-2", routing_domain="org-a", status="deleted", deleted_at=T2)
    assert obligations.adopt() == {"settled_duplicates": 0, "settled_legacy": 1, "copied": 0}
    assert legacy_rows() == [("sb-2", "org-a", "deleted", T2)]


def test_b__null_domain_legacy_proven_by_a_confirmation__deleted_at_its_time():
    legacy("sb-3", routing_domain=None)
    v2("sb-3", routing_domain="org-a", status="deleted", deleted_at=T3)
    event("sb-3", "provider_delete_confirmed", T2, providerOutcome="deleted", routingDomain="org-a")
    obligations.adopt()
    assert legacy_rows() == [("sb-3", None, "deleted", T3)]
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE routing_domain IS NULL") == 0


@pytest.mark.parametrize("outcomes,expected", [(("deleted",), T2), (("already_absent", "deleted"), T1)])
def test_b__legacy_time_from_the_earliest_confirmation_deleted_or_already_absent(outcomes, expected):
    legacy("sb-4", routing_domain="org-a")
    v2("sb-4", routing_domain="org-a", status="deleted", deleted_at=None)
    event("sb-4", "provider_delete_confirmed", T2, routing_domain="org-a", providerOutcome="deleted", routingDomain="org-a")
    if "already_absent" in outcomes:
        event("sb-4", "provider_delete_confirmed", T1, routing_domain="org-a", providerOutcome="already_absent", routingDomain="org-a")
    event("sb-4", "provider_delete_confirmed", T1 - dt.timedelta(hours=1), routing_domain="org-a", providerOutcome="failed", routingDomain="org-a")
    obligations.adopt()
    assert legacy_rows() == [("sb-4", "org-a", "deleted", expected)]


@pytest.mark.requirement("CLN-3")
def test_d__unproven_legacy_copied_to_v2_as_daytona():
    legacy("sb-5", routing_domain="org-a")
    legacy("sb-6", routing_domain=None, status="blocked")
    assert obligations.adopt()["copied"] == 2
    rows = {(r[1], r[2]): r[3] for r in v2_rows()}
    assert rows == {("sb-5", "org-a"): "pending", ("sb-6", None): "blocked"}
    assert [row[2] for row in legacy_rows()] == ["pending", "blocked"]


def test_adoption__a_second_run_changes_nothing():
    legacy("sb-7", routing_domain="org-a")
    legacy("sb-8", routing_domain=None)
    v2("sb-9", routing_domain=None)
    v2("sb-9", routing_domain="org-a", status="deleted", deleted_at=T1)
    event("sb-9", "provider_delete_confirmed", T1, providerOutcome="deleted", routingDomain="org-a")
    obligations.adopt()
    before = factories.table_state()
    assert obligations.adopt() == {"settled_duplicates": 0, "settled_legacy": 0, "copied": 0}
    assert factories.table_state() == before


def test_preflight__nothing_pending__repair_skipped_and_v2_still_claimed():
    legacy("sb-old", status="deleted")
    v2("sb-live", provider="local")
    assert obligations.adoption_pending() is False
    jobs, adopted = obligations.claim(["local"], "owner")
    assert adopted is None
    assert [job.sandbox_id for job in jobs] == ["sb-live"]


def test_preflight__pending_legacy__repair_runs_before_the_claim():
    legacy("sb-new", routing_domain="org-a")
    assert obligations.adoption_pending() is True
    jobs, adopted = obligations.claim(["daytona"], "owner")
    assert adopted["copied"] == 1 and [job.sandbox_id for job in jobs] == ["sb-new"]


def test_claim__empty_provider_list_returns_nothing():
    v2("sb-x", provider="local")
    assert obligations.claim([], "owner") == ([], None)


def test_claim__records_requested_for_jobs_not_yet_accepted_in_its_own_statement():
    v2("sb-new", run_id="run-1")
    v2("sb-accepted", provider="modal", run_id="run-2")
    event("sb-accepted", "provider_delete_accepted", T1, provider="modal", run_id="run-2")
    jobs, _ = obligations.claim(["daytona", "modal", "daytona"], "owner")
    assert sorted((job.sandbox_id, job.delete_accepted) for job in jobs) == [("sb-accepted", True), ("sb-new", False)]
    requested = query("SELECT provider, sandbox_id, run_id, details_json FROM sandbox_cleanup_events_v2 "
                      "WHERE event_type = 'provider_delete_requested'")
    assert [(*row[:3], loads(row[3])) for row in requested] == [("daytona", "sb-new", "run-1", {"routingDomain": None})]


def test_claim__oldest_due_first_across_providers_and_at_most_the_limit():
    for number, provider in enumerate(["modal", "daytona", "local", "daytona"]):
        v2(f"sb-{number}", provider=provider, run_id=f"run-{number}")
        query("UPDATE sandbox_cleanup_jobs_v2 SET available_at = now() - %s * interval '1 minute' WHERE sandbox_id = %s",
              [10 - number, f"sb-{number}"])
    v2("sb-later", provider="modal", run_id="run-later")
    query("UPDATE sandbox_cleanup_jobs_v2 SET available_at = now() + interval '1 hour' WHERE sandbox_id = 'sb-later'")
    jobs, _ = obligations.claim(["daytona", "modal", "local"], "owner", limit=3)
    assert [job.sandbox_id for job in jobs] == ["sb-0", "sb-1", "sb-2"]
    jobs, _ = obligations.claim(["daytona", "modal", "local"], "owner", limit=3)
    assert [job.sandbox_id for job in jobs] == ["sb-3"]


@pytest.fixture
def without_the_optional_legacy_index():
    """SCH-5: the optional partial index on legacy rows is absent (dropped inside this test's transaction)."""
    query("DROP INDEX runtime_scheduler_sandbox_cleanup_legacy_pending_idx")
    assert one("SELECT count(*) FROM pg_indexes WHERE indexname = 'runtime_scheduler_sandbox_cleanup_legacy_pending_idx'") == 0


@pytest.mark.requirement("SCH-5")
def test_without_the_optional_legacy_index__preflight_adoption_and_completion_stay_correct(
        without_the_optional_legacy_index):
    """SCH-5: cleanup is correct without the index: the same proofs, the same copies, the legacy row completed."""
    legacy("sb-proven", routing_domain="org-a")
    v2("sb-proven", routing_domain="org-a", status="deleted", deleted_at=T2)
    parked = factories.parked_run(provider="daytona", routing_domain="org-a")
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    legacy(parked.sandbox_id, run_id=parked.run_id, routing_domain="org-a")
    assert obligations.adoption_pending() is True
    assert obligations.adopt() == {"settled_duplicates": 0, "settled_legacy": 1, "copied": 0}
    [job], _ = obligations.claim(["daytona"], "owner")
    assert obligations.complete(job, "owner", "deleted", "org-a") == "completed"
    assert sorted((row[0], row[2]) for row in legacy_rows()) == sorted([(parked.sandbox_id, "deleted"),
                                                                         ("sb-proven", "deleted")])
    assert obligations.adoption_pending() is False


@pytest.mark.requirement("CLN-4")
def test_claim__attempt_count_rises_on_each_claim():
    """CLN-4: every claim of a job counts an attempt, whatever became of the one before."""
    parked = factories.parked_run(provider="daytona", routing_domain="org-a")
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    counts = []
    for _ in range(3):
        [job], _ = obligations.claim(["daytona"], "owner")
        counts.append(one("SELECT attempt_count FROM sandbox_cleanup_jobs_v2 WHERE sandbox_id = %s", [job.sandbox_id]))
        query("UPDATE sandbox_cleanup_jobs_v2 SET lease_expires_at = now() - interval '1 second', "
              "available_at = now() - interval '1 second'")
    assert counts == [1, 2, 3]
