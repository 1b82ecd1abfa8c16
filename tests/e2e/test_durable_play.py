"""RCP-1 end to end: a play's runner is SIGKILLed after step 2; the retry runs steps 3 and 4 only."""

import datetime as dt
import os
import signal

import pytest

from scheduler.providers.local import reap_children
from scheduler.runs import dispatch, lifecycle, liveness, receipts
from tests import factories
from tests.factories import one
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def effects(tmp_path):
    """Where the play's steps append their side effects (writable by the sandbox's own user)."""
    folder = tmp_path / "effects"
    folder.mkdir()
    folder.chmod(0o777)
    return folder / "effects.log"


def ran(effects, run_id: str) -> list[tuple[str, int]]:
    lines = effects.read_text().splitlines() if effects.exists() else []
    return sorted((step, int(attempt)) for run, step, attempt in (line.split() for line in lines) if run == run_id)


def _launch(play_input: dict) -> str:
    return factories.launch(input=play_input, launch={"play": {"callable": "scheduler.plays:durable_order"},
                                                      "sandboxProvider": "local", "heartbeatTimeoutMs": 1000})


def _finish(run_id: str) -> dict:
    wait_for(lambda: lifecycle.run_status(run_id).status in ("completed", "failed"), f"run {run_id} settling")
    assert lifecycle.run_status(run_id).status == "completed"
    return factories.loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))["output"]


def test_killed_after_step_two__the_retry_runs_steps_three_and_four_only(local_sandboxes, effects):
    run_id = _launch({"order": "A-7", "effectsFile": str(effects), "interruptAfter": 2, "interrupt": "hang"})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: one("SELECT count(*) FROM receipts WHERE run_id = %s AND status = 'completed'", [run_id]) == 2,
             "steps 1 and 2 completed")
    sandbox_id = factories.loads(one("SELECT suspension_json FROM runs WHERE run_id = %s",
                                     [run_id]))["runtimeSandboxRef"]["sandboxId"]
    os.killpg(int(sandbox_id.split("-")[1]), signal.SIGKILL)
    wait_for(lambda: (reap_children(), liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)))[1]
             .counts["verdicts"], "the runner_lost verdict")
    assert dispatch.run_once(5).counts["parked"] == 1
    retried_output = _finish(run_id)

    assert ran(effects, run_id) == sorted([("reserve-stock", 1), ("charge-card", 1), ("send-receipt", 2),
                                           ("ship-parcel", 2)])
    by_key = {row["key"]: row for row in receipts.receipts_of(run_id)}
    assert {key: (row["status"], row["run_attempt"]) for key, row in by_key.items()} == {
        "reserve-stock": ("completed", 1), "charge-card": ("completed", 1),
        "send-receipt": ("completed", 2), "ship-parcel": ("completed", 2)}

    clean_id = _launch({"order": "A-7", "effectsFile": str(effects)})
    assert dispatch.run_once(5).counts["parked"] == 1
    assert _finish(clean_id) == retried_output
    assert len(ran(effects, clean_id)) == 4


def test_a_step_returning_nan_fails_the_step_and_the_play_clearly(local_sandboxes):
    run_id = factories.launch(launch={"play": {"callable": "tests.receipts.plays:nan_step"},
                                      "sandboxProvider": "local", "heartbeatTimeoutMs": 1000})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: lifecycle.run_status(run_id).status in ("completed", "failed"), "the run settling")
    error = factories.loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))["error"]
    assert error["code"] == "play_failed" and "cannot store" in error["message"]
    [receipt] = receipts.receipts_of(run_id)
    assert receipt["status"] == "failed" and receipt["error"]["code"] == "unstorable_output"
