"""End to end on the local provider: a runner killed with SIGKILL is judged lost once, and the retry completes."""

import datetime as dt
import os
import signal

import pytest

from scheduler.runs import dispatch, lifecycle
from scheduler.providers.local import reap_children
from scheduler.runs import liveness
from tests import factories
from tests.factories import heartbeat_at, one, query
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_runner_killed__runner_lost_once__attempt_two_completes(local_sandboxes):
    run_id = factories.launch(launch={"play": {"callable": "tests.plays:slow_first_attempt"},
                                      "sandboxProvider": "local", "heartbeatTimeoutMs": 1000})
    assert dispatch.run_once(5).counts["parked"] == 1
    suspension = factories.loads(one("SELECT suspension_json FROM runs WHERE run_id = %s", [run_id]))
    sandbox_id = suspension["runtimeSandboxRef"]["sandboxId"]
    wait_for(lambda: heartbeat_at(run_id, 1), "the runner's first heartbeat")

    os.killpg(int(sandbox_id.split("-")[1]), signal.SIGKILL)
    wait_for(lambda: (reap_children(), liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)))[1]
             .counts["verdicts"], "the runner_lost verdict")
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
    lost = factories.loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s AND attempt = 1", [run_id]))
    assert lost["error"]["code"] == "runner_lost"

    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: lifecycle.run_status(run_id).status == "completed", "attempt 2 completing")
    output = factories.loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))["output"]
    assert output == {"attempt": 2}
    facts = [row[0] for row in query("SELECT event_type FROM outbox WHERE run_id = %s ORDER BY created_at", [run_id])]
    assert facts.count("run.completed") == 1 and "run.failed" not in facts
    assert facts.count("run.attempt_failed") == 1
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == 2
    stats = factories.loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s AND attempt = 2", [run_id]))["stats"]
    assert set(stats["runtimeResources"]) == {"cpuMs", "wallMs", "peakMemoryBytes"}
    assert stats["runtimeResources"]["peakMemoryBytes"] > 0
