"""CLN-5 (issue 47): the acceptances of deletes that finish later (Daytona), arrived together, are recorded in ONE
statement, each job fenced on its own lease: a job another worker took meanwhile keeps its holder and its look,
the others are set to be read back later; every acceptance is on record (billing ends there)."""

import pytest

from scheduler import db
from scheduler.cleanup import obligations, provider_calls, sandbox_sweep
from scheduler.providers import DeleteOutcome, ReadBack
from tests.cleanup.factories import v2
from tests.factories import one, query

pytestmark = pytest.mark.django_db


def _claimed(count: int) -> list[obligations.Job]:
    for index in range(count):
        v2(f"sb-{index}", provider="daytona", run_id=f"run-{index}")
    jobs, _ = obligations.claim(["daytona"], "owner", 20, 60)
    return sorted(jobs, key=lambda job: job.sandbox_id)


@pytest.mark.requirement("CLN-5")
def test_one_statement_for_acceptances_that_arrived_together__a_stolen_lease_refused_alone(monkeypatch):
    jobs = _claimed(3)
    query("UPDATE sandbox_cleanup_jobs_v2 SET lease_owner = 'another' WHERE sandbox_id = 'sb-1'")
    statements: list[str] = []
    real = db.fetch_all
    monkeypatch.setattr(db, "fetch_all", lambda name, *args, **kwargs: statements.append(name) or real(name, *args, **kwargs))
    result = sandbox_sweep.CleanupTick()
    answers = [provider_calls.Answer(job, DeleteOutcome.ACCEPTED, done_when_accepted=False) for job in jobs]
    done = provider_calls.Answer(jobs[0], ReadBack.DELETED)  # not an acceptance: handed back for its own record

    rest = sandbox_sweep.record_finishing_later(answers + [done], "owner", result, 60_000)

    assert statements == ["sandbox_cleanup_accepted_look_later"] and rest == [done]
    assert (result.counts["accepted"], result.counts["retried"]) == (3, 3)
    assert query("SELECT sandbox_id, lease_owner, available_at > now() + interval '50 seconds' "
                 "FROM sandbox_cleanup_jobs_v2 ORDER BY 1") == [
        ("sb-0", None, True), ("sb-1", "another", False), ("sb-2", None, True)]
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_accepted'") == 3


def test_the_answer_per_job_is_in_input_order():
    jobs = _claimed(3)
    query("UPDATE sandbox_cleanup_jobs_v2 SET lease_owner = 'another' WHERE sandbox_id = 'sb-0'")
    assert obligations.accepted_look_later(list(reversed(jobs)), "owner", 60_000) == [True, True, False]


def test_a_batch_naming_a_job_twice_is_refused_and_writes_nothing():
    jobs = _claimed(1)
    with pytest.raises(Exception, match="names each job once"):
        obligations.accepted_look_later(jobs * 2, "owner", 60_000)
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_accepted'") == 0
