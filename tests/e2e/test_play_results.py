"""End to end on the local provider: a result that cannot be stored or a play that cannot start is said once, at once."""

import pytest

from scheduler.runs import dispatch, lifecycle
from tests import factories
from tests.factories import loads, one
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _run_to_the_end(play: str) -> dict:
    run_id = factories.launch(launch={"play": {"callable": play}, "sandboxProvider": "local"})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: lifecycle.run_status(run_id).status in ("completed", "failed"), f"{play} settling", seconds=60)
    assert one("SELECT count(*) FROM attempts WHERE run_id = %s", [run_id]) == 1  # recorded once, never rerun
    return {"status": lifecycle.run_status(run_id).status,
            "result": loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s", [run_id]))}


@pytest.mark.parametrize("play,path", [
    ("tests.plays:not_a_number", "output.scores[1]"),
    ("tests.plays:nul_text", "output.text"),
])
def test_unstorable_output__failed_unstorable_output_naming_the_path__no_rerun(local_sandboxes, play, path):
    outcome = _run_to_the_end(play)
    assert outcome["status"] == "failed"
    assert outcome["result"]["error"]["code"] == "unstorable_output"
    assert path in outcome["result"]["error"]["message"]


@pytest.mark.parametrize("play,expected", [
    ("scheduler.no_such_module:play", "ModuleNotFoundError: No module named 'scheduler.no_such_module'"),
    ("tests.plays:no_such_function", "AttributeError"),
])
def test_a_play_that_cannot_start__play_start_failed_with_the_traceback_tail(local_sandboxes, play, expected):
    outcome = _run_to_the_end(play)
    assert outcome["status"] == "failed"
    assert outcome["result"]["error"]["code"] == "play_start_failed"
    assert expected in outcome["result"]["error"]["message"]
    assert expected in outcome["result"]["logTail"]  # the runner's log, kept before cleanup deletes it


def test_the_readme_first_example__a_module_function_play_name__completes(local_sandboxes):
    run_id = factories.launch(play_name="scheduler.plays:hello", input={"name": "you"},
                              launch={"sandboxProvider": "local"})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: lifecycle.run_status(run_id).status == "completed", "the README's example completing")
    assert loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))["output"] == {"greeting": "hello, you"}


def test_local_sandbox_as_root__the_play_runs_unprivileged_and_cannot_read_the_schedulers_environment(local_sandboxes):
    import os

    if os.geteuid() != 0:
        pytest.skip("plays change user only when the scheduler runs as root")
    run_id = factories.launch(input={"pid": os.getpid()},
                              launch={"play": {"callable": "tests.plays:who_am_i"}, "sandboxProvider": "local"})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: lifecycle.run_status(run_id).status == "completed", "the play reporting who it is")
    output = loads(one("SELECT terminal_result_json FROM runs WHERE run_id = %s", [run_id]))["output"]
    assert output["uid"] != 0 and output["readsSchedulerEnvironment"] is False
