"""SWP-5: runner terminals arriving while the sweep records verdicts; exactly one result per attempt."""

import json

import pytest

from scheduler import db
from scheduler.runs import liveness, settlement
from tests import factories
from tests.concurrency import threads
from tests.factories import loads, one, query

pytestmark = pytest.mark.django_db(transaction=True)
TRIALS = 200
IDENTITY = "2026-04-01T00:00:00.000000Z"


def sweep_verdict(run):
    recorded = int(liveness.record_runner_loss(run.run_id, 1, run.lease_token, IDENTITY,
                                               factories.failed_result("runner_lost", verdict="runner_lost"), {"writer": "sweep"}).recorded_now)
    settled = settlement.settle_attempt(run.run_id, 1, run.lease_token)
    return recorded, settled


@pytest.mark.requirement("SWP-5")
def test_runner_terminals_vs_sweep_verdicts__200_trials__one_result_per_attempt():
    runs = [factories.parked_run(max_attempts=1) for _ in range(TRIALS)]
    query("UPDATE attempts SET heartbeat_at = %s::timestamptz", [IDENTITY])
    outcomes = {"runner": 0, "sweep": 0}
    for run in runs:
        runner, sweep = threads.run_together(
            lambda run=run: factories.report_terminal(run.run_id, 1, run.lease_token, factories.completed_result()),
            lambda run=run: sweep_verdict(run),
        )
        runner_answer, (verdict_rows, _) = runner.get(), sweep.get()
        result = loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s", [run.run_id]))
        winner = "runner" if result["status"] == "completed" else "sweep"
        assert verdict_rows == (1 if winner == "sweep" else 0)
        # The runner's result is recorded when it won; when the sweep's verdict won, it is kept beside it as late.
        assert (runner_answer["recorded"], runner_answer.get("late", False)) == \
            ((True, False) if winner == "runner" else (False, True))
        facts = query("SELECT event_type FROM outbox WHERE run_id = %s AND event_type IN "
                      "('run.completed', 'run.failed', 'run.attempt_failed')", [run.run_id])
        assert facts == [("run.completed",) if winner == "runner" else ("run.failed",)]
        outcomes[winner] += 1
    # One verdict per attempt across every trial: exactly one terminal fact per run, whoever won.
    assert one("SELECT count(*) FROM outbox WHERE event_type IN ('run.completed', 'run.failed')") == TRIALS
