"""SWP-6 and dispatch_runs as processes: SIGTERM mid-tick finishes the tick, then exits 0; only bad configuration
exits non-zero."""

import signal
import subprocess

import pytest

from tests import factories
from tests.concurrency.threads import wait_until_blocked
from tests.factories import loads, one
from tests.support import PROJECT_DIR, connect, current_database_url, manage_command, manage_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def start(name, *args, app):
    return subprocess.Popen(manage_command(name, *args), cwd=PROJECT_DIR, text=True,
                            env=manage_env(current_database_url(), SCHEDULER_APPLICATION_NAME=app),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_liveness_sweep__sigterm_mid_tick__tick_finishes_and_exit_0():
    parked = factories.parked_run()
    factories.recorded_unsettled(parked.run_id, 1, factories.completed_result())
    with connect() as holder:
        holder.execute("SELECT 1 FROM runtime_scheduler.runs WHERE run_id = %s FOR UPDATE", [parked.run_id])
        process = start("run_liveness_sweep", "--interval", "0.2", app="sweep-under-test")
        try:
            wait_until_blocked("sweep-under-test")
            process.send_signal(signal.SIGTERM)
            assert process.poll() is None  # still inside its tick
        finally:
            holder.rollback()
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "completed"


def test_dispatch__sigterm_mid_tick__tick_finishes_and_exit_0():
    run_id = factories.launch(launch={"sandboxProvider": "daytona", "routingDomain": "org-without-key"})
    with connect() as holder:
        holder.execute("LOCK TABLE runtime_scheduler.attempts IN SHARE MODE")
        process = start("dispatch_runs", "--interval", "0.2", app="dispatch-under-test")
        try:
            wait_until_blocked("dispatch-under-test")
            process.send_signal(signal.SIGTERM)
            assert process.poll() is None
        finally:
            holder.rollback()
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    result = loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s AND attempt = 1", [run_id]))
    assert result["error"]["code"] == "dispatch_lost"
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"


@pytest.mark.parametrize("command,args", [
    ("run_liveness_sweep", ["--limit", "0"]),
    ("run_liveness_sweep", ["--limit", "101"]),
    ("run_liveness_sweep", ["--default-heartbeat-timeout-ms", "-5"]),
    ("dispatch_runs", ["--limit", "0"]),
])
def test_loops__configuration_errors__non_zero_with_one_line(command, args):
    result = run_manage(command, "--once", *args, database_url_value=current_database_url())
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1


def test_liveness_sweep__once__exit_0():
    assert run_manage("run_liveness_sweep", "--once", database_url_value=current_database_url()).returncode == 0
