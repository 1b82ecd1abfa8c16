"""SWP-3/5/7, RUN-9, RUN-10: the sweep's inspection, settlement and recoveries, with a recording provider."""

import datetime as dt
import json

import pytest

from scheduler import db
from scheduler.runs import beats, lifecycle, settlement
from scheduler.providers import DeleteOutcome, Inspection, ProviderError, SandboxRef
from scheduler.providers.base import SandboxProvider
from scheduler.runs import liveness
from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)


class RecordingProvider(SandboxProvider):
    """Answers inspections from a dict and records every call; stands in for a provider's API."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.calls = []
        self.started = {}  # (run_id, attempt) -> sandbox ids a start left, or a ProviderError to raise

    def inspect(self, ref):
        self.calls.append(("inspect", ref.sandbox_id))
        return self.answers.get(ref.sandbox_id, Inspection.GONE)

    def delete(self, ref):
        self.calls.append(("delete", ref.sandbox_id))
        return DeleteOutcome.ACCEPTED

    def find_started(self, run_id, attempt, routing_domain):
        self.calls.append(("find_started", run_id, attempt))
        found = self.started.get((run_id, attempt), [])
        if isinstance(found, ProviderError):
            raise found
        return [SandboxRef("local", sandbox_id, routing_domain) for sandbox_id in found]


@pytest.fixture
def provider(monkeypatch):
    fake = RecordingProvider()
    monkeypatch.setattr(liveness, "get_provider", lambda name: fake)
    return fake


@pytest.mark.requirement("SWP-3")
def test_gone_sandbox__runner_lost_verdict_then_retry(provider):
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    result = liveness.run_once(now=LATER)
    assert (result.counts["inspected"], result.counts["verdicts"]) == (1, 1)
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "queued"
    error = factories.loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s", [parked.run_id]))["error"]
    assert error["code"] == "runner_lost"
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 1


@pytest.mark.requirement("SWP-3")
def test_live_sandbox__left_alone(provider):
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    provider.answers[parked.sandbox_id] = Inspection.RUNNING
    result = liveness.run_once(now=LATER)
    assert (result.counts["alive"], result.counts["verdicts"]) == (1, 0)
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "waiting"


@pytest.mark.requirement("SWP-3")
def test_unknown_answer__no_verdict(provider):
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    provider.answers[parked.sandbox_id] = Inspection.UNKNOWN
    assert liveness.run_once(now=LATER).counts["verdicts"] == 0


@pytest.mark.requirement("SWP-5")
def test_recorded_terminal__settled_by_the_sweep(provider):
    parked = factories.parked_run()
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    assert liveness.run_once().counts["settled"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "completed"
    assert provider.calls == []


def test_dispatcher_died_between_claim_and_park__dispatch_lost_and_claimed_again(provider):
    run_id = factories.launch()
    claimed = factories.claim(run_id)
    result = liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=claimed_lease_seconds() + 1))
    assert result.counts["dispatch_lost"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
    assert factories.loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s AND attempt = 1",
                               [run_id]))["error"]["code"] == "dispatch_lost"
    assert factories.claim(run_id).attempt == claimed.attempt + 1


@pytest.mark.requirement("CLN-1")
def test_dispatcher_died_between_start_and_park__its_sandbox_gets_a_cleanup_obligation(provider):
    """CLN-1: a sandbox whose attempt never parked."""
    run_id = factories.launch()
    claimed = factories.claim(run_id)
    provider.started[(run_id, claimed.attempt)] = ["orphan-sandbox"]
    liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=claimed_lease_seconds() + 1))
    assert query("SELECT provider, sandbox_id, attempt, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s",
                 [run_id]) == [("local", "orphan-sandbox", claimed.attempt, "pending")]
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"


def test_listing_the_claims_sandboxes_fails__the_verdict_is_not_held_back_and_the_search_retried(provider):
    run_id = factories.launch()
    claimed = factories.claim(run_id)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=claimed_lease_seconds() + 1)
    provider.started[(run_id, claimed.attempt)] = ProviderError("provider unreachable")
    assert liveness.run_once(now=later).counts["dispatch_lost"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 1
    provider.started[(run_id, claimed.attempt)] = ProviderError("no credential", permanent=True)
    assert liveness.run_once(now=later).counts["unparked_reconciled"] == 1
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 0


def test_a_claim_that_parked_after_the_listing__no_verdict_and_no_obligation_for_its_live_sandbox():
    parked = factories.parked_run()
    query("UPDATE attempts SET lease_expires_at = now() - interval '1 hour' WHERE run_id = %s", [parked.run_id])
    recorded = db.execute("attempts_record_dispatch_lost", {
        "run_id": parked.run_id, "attempt": parked.attempt, "lease_token": parked.lease_token, "now": None,
        "expected_heartbeat_at": None, "result": json.dumps(factories.failed_result("dispatch_lost")),
    })
    assert recorded == 0
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 0
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 0


@pytest.mark.requirement("RUN-9", "SWP-4")
@pytest.mark.parametrize("moved", ["heartbeat", "cancel"])
def test_an_expired_claim__a_heartbeat_or_a_cancel_after_the_listing__no_dispatch_lost(moved):
    """RUN-9 with SWP-4's fences: the recovery is fenced on the heartbeat identity it read and no queued cancel."""
    from scheduler.runs import lifecycle

    run_id = factories.launch()
    claimed = factories.claim(run_id)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=claimed_lease_seconds() + 1)
    [row] = db.fetch_all("attempts_list_expired_claims", {"limit": 10, "now": later})
    if moved == "heartbeat":
        query("UPDATE attempts SET heartbeat_at = clock_timestamp() WHERE run_id = %s", [run_id])
    else:
        lifecycle.cancel_run(run_id, "test")
    recorded = db.execute("attempts_record_dispatch_lost", {
        "run_id": run_id, "attempt": claimed.attempt, "lease_token": claimed.lease_token, "now": later,
        "expected_heartbeat_at": row["heartbeat_identity"],
        "result": json.dumps(factories.failed_result("dispatch_lost")),
    })
    assert recorded == 0
    assert one("SELECT runner_result_json IS NULL FROM attempts WHERE run_id = %s", [run_id]) is True


def claimed_lease_seconds():
    from scheduler.conf import scheduler_settings

    return scheduler_settings.claim_lease_seconds


def test_unexpired_claim__not_recovered(provider):
    run_id = factories.launch()
    factories.claim(run_id)
    assert liveness.run_once().counts["dispatch_lost"] == 0
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "running"


def test_cancel_on_a_dead_runner__cancelled_after_timeout_with_cleanup_obligation(provider):
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    lifecycle.cancel_run(parked.run_id)
    assert liveness.run_once().counts["cancels_settled"] == 0  # within its timeout
    result = liveness.run_once(now=LATER)
    assert result.counts["cancels_settled"] == 1
    assert ("delete", parked.sandbox_id) in provider.calls
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "cancelled"
    assert one("SELECT count(*) FROM outbox WHERE event_id = %s", [f"{parked.run_id}:run.cancelled"]) == 1
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 1


@pytest.mark.requirement("SWP-7")
def test_passed_wait_deadline__wait_deadline_exceeded_without_asking_the_provider(provider):
    parked = factories.parked_run(heartbeat_timeout_ms=3_600_000, max_attempts=3)
    query("UPDATE runs SET wait_deadline = now() - interval '1 second' WHERE run_id = %s", [parked.run_id])
    result = liveness.run_once()
    assert result.counts["deadlines_settled"] == 1
    assert provider.calls == []
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "failed"
    assert factories.loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s",
                               [parked.run_id]))["error"]["code"] == "wait_deadline_exceeded"
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [parked.run_id]) == 1


def test_runner_reports_from_a_never_parked_attempt__its_sandbox_found_and_obliged(provider):
    run_id = factories.launch()
    claimed = factories.claim(run_id)  # the dispatcher died after starting the sandbox, before park
    factories.report_terminal(run_id, claimed.attempt, claimed.lease_token, factories.completed_result())
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "completed"
    assert one("SELECT count(*) FROM control WHERE key = %s", [f"sandbox_unreconciled:{run_id}:{claimed.attempt}"]) == 1
    provider.started[(run_id, claimed.attempt)] = ["orphan-of-a-finished-runner"]
    assert liveness.run_once().counts["unparked_reconciled"] == 1
    assert query("SELECT sandbox_id, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == [
        ("orphan-of-a-finished-runner", "pending")]
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 0


def test_runner_reports_from_a_parked_attempt__no_reconciliation_needed(provider):
    parked = factories.parked_run()
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 0
    assert liveness.run_once().counts["unparked_reconciled"] == 0


def test_unreconciled_sandbox__provider_unreachable__kept_for_the_next_tick(provider):
    run_id = factories.launch()
    claimed = factories.claim(run_id)
    factories.report_terminal(run_id, claimed.attempt, claimed.lease_token, factories.completed_result())
    provider.started[(run_id, claimed.attempt)] = ProviderError("provider unreachable")
    assert liveness.run_once().counts["unparked_reconciled"] == 0
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 1
    provider.started[(run_id, claimed.attempt)] = []
    assert liveness.run_once().counts["unparked_reconciled"] == 1
    assert one("SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'") == 0


@pytest.mark.requirement("RUN-10")
def test_cancel_ignored_by_a_runner_that_keeps_heartbeating__settled_a_timeout_after_the_cancel(provider):
    """RUN-10 is timed from the cancel's queueing: fresh heartbeats do not postpone it for ever."""
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    lifecycle.cancel_run(parked.run_id)
    query("UPDATE control SET created_at = now() - interval '5 seconds' WHERE key = %s", [f"runtime_cancel:{parked.run_id}"])
    beats.heartbeat(parked.run_id, 1, parked.lease_token)  # the runner is alive and ignores the cancel
    result = liveness.run_once()
    assert result.counts["cancels_settled"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "cancelled"


@pytest.mark.requirement("RUN-10")
def test_cancels_of_ended_runs__marked_by_the_sweep_and_read_no_more_while_open_ones_stay(provider):
    """RUN-10 at the cost of what is open: a cancel's key stays (it is the cancel), its run's end is marked."""
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    ended = factories.parked_run(heartbeat_timeout_ms=1000)
    lifecycle.cancel_run(parked.run_id)
    lifecycle.cancel_run(ended.run_id)
    factories.report_terminal(ended.run_id, 1, ended.lease_token, factories.completed_result())
    liveness.run_once()
    marks = dict(query("SELECT key, value_json ? 'runEndedAt' FROM control WHERE key LIKE 'runtime_cancel:%%'"))
    assert marks == {f"runtime_cancel:{parked.run_id}": False, f"runtime_cancel:{ended.run_id}": True}
    assert one("SELECT status FROM runs WHERE run_id = %s", [ended.run_id]) == "completed"
    assert liveness.run_once(now=LATER).counts["cancels_settled"] == 1  # the open one, after its timeout
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "cancelled"
    query("UPDATE control SET value_json = '{}' WHERE key = %s", [f"runtime_cancel:{parked.run_id}"])
    liveness.run_once(now=LATER)
    assert one("SELECT value_json ? 'runEndedAt' FROM control WHERE key = %s", [f"runtime_cancel:{parked.run_id}"])


@pytest.mark.requirement("SWP-6")
def test_one_structured_log_line_per_action(provider, caplog):
    """SWP-6: each action the sweep takes is one line naming it, its run and attempt; nothing else is logged."""
    recorded = factories.parked_run()
    factories.recorded_unsettled(recorded.run_id, 1, factories.completed_result())
    lost = factories.parked_run(heartbeat_timeout_ms=1000)
    claimed_id = factories.launch()
    factories.claim(claimed_id)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    caplog.set_level("INFO", logger="scheduler.sweep.liveness")
    result = liveness.run_once(now=later)
    lines = [record.getMessage() for record in caplog.records if record.name == "scheduler.sweep.liveness"]
    actions = sorted(line.split()[1] for line in lines)
    assert actions == ["action=dispatch_lost", "action=runner_lost", "action=settled_recorded_terminal",
                       "action=unparked_reconciled"], lines
    assert all(line.startswith("liveness action=") for line in lines)
    assert any(f"run={lost.run_id} attempt=1" in line for line in lines)
    assert (result.counts["settled"], result.counts["verdicts"], result.counts["dispatch_lost"]) == (1, 1, 1)
