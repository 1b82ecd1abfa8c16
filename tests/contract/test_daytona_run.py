"""PRV-3, PRV-6: a run launched with "sandboxProvider": "daytona" completes end to end through the contract mock: Prism checks
every request against Daytona's documents, the fake keeps the server's rules and really runs the command its
toolbox is given, in an empty directory, with an interpreter that cannot import the scheduler (as a stock image
would). The runner gets there only because the start uploaded it. Then cleanup deletes through the same proxy
and billing ends at the delete's acceptance."""

import json
import subprocess

import pytest

from scheduler.cleanup import billing_sweep, sandbox_sweep
from scheduler.runs import dispatch, lifecycle
from tests import factories
from tests.factories import loads, one
from tests.providers.fake_daytona_toolbox import base_python
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_sandboxes_interpreter_cannot_import_the_scheduler():
    result = subprocess.run([base_python(), "-c", "import scheduler"], cwd="/", capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode != 0 and "No module named 'scheduler'" in result.stderr


def test_a_daytona_live_completes_with_the_runner_its_start_uploaded(daytona_live):
    fake = daytona_live.fake
    run_id = factories.launch(org_id="org-contract", input={"name": "daytona"}, max_attempts=1,
                              launch={"sandboxProvider": "daytona", "play": {"callable": "scheduler.sandbox.probe:hello"}})
    assert dispatch.run_once(1).counts["parked"] == 1
    sandbox_id = loads(one("SELECT suspension_json FROM runs WHERE run_id = %s", [run_id]))["runtimeSandboxRef"]["sandboxId"]
    log = fake.toolbox.workdir(sandbox_id) / "runner.log"
    try:
        wait_for(lambda: lifecycle.run_status(run_id).status in ("completed", "failed"), "the run finishing")
    except AssertionError:
        raise AssertionError(f"the runner's log: {log.read_text() if log.exists() else '(none)'}") from None
    result = loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))
    assert lifecycle.run_status(run_id).status == "completed", result
    assert result["output"]["greeting"] == "hello, daytona"
    assert result["output"]["executable"] == fake.toolbox.python  # the sandbox's interpreter, not this virtualenv's
    assert fake.toolbox.uploads[sandbox_id] and fake.sandboxes[sandbox_id]["env"]["SCHEDULER_RUN_ID"] == run_id
    assert "PYTHONPATH" not in fake.sandboxes[sandbox_id]["env"]  # nothing of the scheduler host's own paths

    swept = sandbox_sweep.run_once(["daytona"], "contract-cleaner")
    assert swept.counts["accepted"] == 1
    assert fake.sandboxes[sandbox_id]["desiredState"] == "destroyed"
    wait_for(lambda: sandbox_sweep.run_once(["daytona"], "contract-cleaner").counts["confirmed"] or
             one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_confirmed'"),
             "the delete read back")
    assert billing_sweep.run_once("contract-biller").counts["finalized"] == 1
    accepted_at = one("SELECT created_at FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_accepted'")
    assert one("SELECT billing_ended_at FROM billing_items WHERE run_id = %s", [run_id]) == accepted_at
    assert json.dumps(result)  # the whole result was stored as JSON
