"""BIL-1 in batches: one finalize statement for a tick's jobs decides each as finalizing it alone would."""

import datetime as dt

import pytest

from scheduler.cleanup import billing, billing_sweep
from tests.cleanup.test_completion_and_billing import START_MS, billed_run
from tests import factories
from tests.factories import one, query
from tests.concurrency import threads

pytestmark = pytest.mark.django_db


def _ended(sandbox_id: str) -> list[dict]:
    return [{"provider": "local", "sandboxId": sandbox_id, "billingStartedAt": START_MS,
             "billingEndedAt": START_MS + 7_000}]


@pytest.mark.requirement("BIL-1")
def test_a_batch_with_a_stale_item__finalizes_the_others_and_leaves_that_one_to_its_holder():
    """One statement locks the due jobs and finalizes each on its own: a job another worker holds a live lease on
    (an older release's claim) is not taken; a late resource waits; a run not terminal is leased, not billed."""
    billed, other_worker, late = (billed_run(_ended(f"sb-{n}")) for n in range(3))
    not_terminal = factories.launch()
    query("INSERT INTO compute_billing_jobs_v2 (run_id) VALUES (%s)", [not_terminal])
    started = int((dt.datetime.now(dt.UTC) - dt.timedelta(seconds=10)).timestamp() * 1000)
    query("UPDATE runs SET runtime_resources_json = %s::jsonb WHERE run_id = %s",
          [f'[{{"provider": "daytona", "sandboxId": "sb-late", "billingStartedAt": {started}}}]', late])
    query("UPDATE compute_billing_jobs_v2 SET lease_owner = 'another-worker', "
          "lease_expires_at = now() + interval '5 minutes' WHERE run_id = %s", [other_worker])

    due_before = dict(query("SELECT run_id, available_at FROM compute_billing_jobs_v2"))
    answers = billing.finalize_due("owner")

    assert [(row["run_id"], row["status"], row["items_written"]) for row in answers] == sorted([
        (billed, "finalized", 1), (late, "pending", 0), (not_terminal, None, 0)])
    assert next(row for row in answers if row["run_id"] == late)["waiting_until_ms"] > started
    assert query("SELECT run_id, status, lease_owner FROM compute_billing_jobs_v2 ORDER BY run_id") == sorted([
        (billed, "finalized", None), (other_worker, "pending", "another-worker"), (late, "pending", None),
        (not_terminal, "pending", "owner")])
    assert query("SELECT run_id, duration_ms FROM billing_items") == [(billed, 7_000)]
    due_after = dict(query("SELECT run_id, available_at FROM compute_billing_jobs_v2"))
    assert [due_after[run] == due_before[run] for run in (billed, other_worker, late, not_terminal)] == [
        True, True, False, True]
    assert one("SELECT lease_expires_at > now() + interval '4 minutes' FROM compute_billing_jobs_v2 "
               "WHERE run_id = %s", [not_terminal]) is True
    assert billing.finalize_due("owner") == []  # the late one looks again later, the others are held or done


@pytest.mark.requirement("BIL-1")
def test_a_tick__finalizes_every_job_it_claimed():
    runs = [billed_run(_ended(f"sb-{n}")) for n in range(5)]
    assert billing_sweep.run_once("owner").counts == {"claimed": 5, "finalized": 5, "waiting": 0, "billed": 5}
    assert one("SELECT count(*) FROM billing_items WHERE run_id = ANY (%s)", [runs]) == 5


@pytest.mark.django_db(transaction=True)
@pytest.mark.requirement("BIL-1")
def test_two_workers_finalizing_the_same_jobs_at_once__bill_each_run_once():
    runs = [billed_run(_ended(f"sb-{n}")) for n in range(6)]
    outcomes = threads.run_together(lambda: billing.finalize_due("one", limit=6),
                                    lambda: billing.finalize_due("other", limit=6))
    finalized = [row["run_id"] for outcome in outcomes for row in outcome.get() if row["status"] == "finalized"]
    assert sorted(finalized) == sorted(runs)
    assert one("SELECT count(*) FROM billing_items") == 6
