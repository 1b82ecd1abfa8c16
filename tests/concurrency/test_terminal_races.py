"""One verdict per attempt: runner terminals race synthetic losses; intents race settlement."""

import threading

import pytest
from django.db import transaction

from scheduler.runs import lifecycle, liveness, settlement
from tests import factories
from tests.concurrency import threads
from tests.factories import loads, one, query

pytestmark = pytest.mark.django_db(transaction=True)
TRIALS = 200
IDENTITY = "2026-06-01T12:00:00.000000Z"


def test_runner_terminal_vs_synthetic_loss__200_trials__one_result_the_first_writers():
    parked = [factories.parked_run(run_log_store="planet_scale", max_attempts=1) for _ in range(TRIALS)]
    query("UPDATE attempts SET heartbeat_at = %s::timestamptz", [IDENTITY])
    winners = {"runner": 0, "sweep": 0}
    for run in parked:
        def runner(run=run):
            return factories.report_terminal(
                run.run_id, 1, run.lease_token, factories.completed_result({"writer": "runner"}),
                log_payload={"writer": "runner"},
            )

        def sweep(run=run):
            """The sweep's production loss ingress (TRM-2), then its settlement."""
            outcome = liveness.record_runner_loss(
                run.run_id, 1, run.lease_token, IDENTITY,
                factories.failed_result("runner_lost", writer="sweep", verdict="runner_lost"), {"writer": "sweep"},
            )
            settlement.settle_attempt(run.run_id, 1, run.lease_token)
            return outcome

        runner_outcome, sweep_outcome = threads.run_together(runner, sweep)
        runner_outcome.get()
        sweep_record = sweep_outcome.get()
        result, log = (loads(value) for value in one(
            "SELECT runner_result_json, runner_log_payload_json FROM attempts WHERE run_id = %s AND attempt = 1", [run.run_id]
        ))
        writer = "runner" if result["status"] == "completed" else "sweep"
        assert log == {"writer": writer}
        assert sweep_record.recorded_now == (writer == "sweep") and sweep_record.recorded
        winners[writer] += 1
        terminal_facts = query(
            "SELECT event_type FROM outbox WHERE run_id = %s AND event_type IN ('run.completed', 'run.failed')", [run.run_id]
        )
        assert terminal_facts == [("run.completed" if writer == "runner" else "run.failed",)]
        assert one("SELECT status FROM runs WHERE run_id = %s", [run.run_id]) == (
            "completed" if writer == "runner" else "failed"
        )
    # One verdict per attempt, across every trial: exactly one terminal fact per run, whoever won.
    assert one("SELECT count(*) FROM outbox WHERE event_type IN ('run.completed', 'run.failed')") == TRIALS


def test_array_intent_vs_settlement__never_registered_after_the_terminal_committed():
    parked = factories.parked_run(org_id="org-a")
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    may_commit, holding = threading.Event(), threading.Event()

    def settle_and_hold():
        with transaction.atomic():
            settled = settlement.settle_attempt(parked.run_id, 1, parked.lease_token)
            holding.set()
            may_commit.wait(30)
        return settled

    settler, settled = threads.start(settle_and_hold)
    assert holding.wait(30)
    registrar, registered = threads.start(
        lambda: lifecycle.register_array_input_intent(parked.run_id, "org-a", 1), application_name="intent-registrar"
    )
    try:
        threads.wait_until_blocked("intent-registrar")
    finally:
        may_commit.set()
    settler.join(30)
    registrar.join(30)
    assert settled.get().run_status == "completed"
    assert registered.get() is False
    assert one("SELECT status, array_input_started FROM runs WHERE run_id = %s", [parked.run_id]) == ("completed", False)


def test_array_intent_vs_settlement__200_trials__registered_then_terminal_or_refused():
    parked = [factories.parked_run(org_id="org-a") for _ in range(TRIALS)]
    for run in parked:
        factories.recorded_unsettled(run.run_id, 1, factories.completed_result())
    for run in parked:
        registered, settled = threads.run_together(
            lambda run=run: lifecycle.register_array_input_intent(run.run_id, "org-a", 1),
            lambda run=run: settlement.settle_attempt(run.run_id, 1, run.lease_token),
        )
        assert settled.get().run_status == "completed"
        status, started = one("SELECT status, array_input_started FROM runs WHERE run_id = %s", [run.run_id])
        assert status == "completed"
        # Both orders are legal and the race decides which: the flag must always say which one happened.
        assert started is registered.get()
