"""TSK-1..5: SchedulerBackend enqueues runs, runs tasks in local sandboxes, and reads results from any process."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import signal
import subprocess
import sys

import pytest
from django.core import checks
from django.db import transaction
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import InvalidTask

from scheduler.providers.local import reap_children
from scheduler.runs import dispatch, lifecycle, liveness
from scheduler.sandbox.protocol import worker_id
from scheduler.tasks import SchedulerBackend
from scheduler.tasks.exceptions import TaskRunnerLost
from tests.factories import loads, one
from tests.support import PROJECT_DIR, current_database_url, wait_for
from tests.taskbackend import tasks
from tests.taskbackend.support import TEST_TASKS, finish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def task_settings(settings):
    settings.TASKS = TEST_TASKS


@pytest.mark.requirement("TSK-4")
def test_the_flags_say_what_the_backend_keeps():
    """TSK-4: get_result, defer (run_after), priority and coroutine tasks are all supported."""
    backend = task_backends["default"]
    assert isinstance(backend, SchedulerBackend)
    assert (backend.supports_get_result, backend.supports_defer, backend.supports_priority,
            backend.supports_async_task) == (True, True, True, True)


@pytest.mark.requirement("TSK-1")
def test_enqueue_is_a_launch__the_task_is_the_play_and_its_arguments_the_input():
    """TSK-1: one queued run whose play names module:function and the settings module, input {args, kwargs}."""
    result = tasks.echo.using(priority=7).enqueue(1, "two", three=[3])
    row = one("SELECT json_build_array(play_name, org_id, status, priority, launch_json, input_json) FROM runs "
              "WHERE run_id = %s", [result.id])
    play_name, org_id, status, priority, launch, play_input = loads(row)
    assert (play_name, org_id, status, priority) == ("tests.taskbackend.tasks:echo", "org-tasks", "queued", 7)
    assert launch["play"] == {"task": "tests.taskbackend.tasks:echo", "settingsModule": "config.settings",
                              "takesContext": False, "queueName": "default", "backend": "default"}
    assert (launch["sandboxProvider"], launch["heartbeatTimeoutMs"]) == ("local", 1000)
    assert play_input == {"args": [1, "two"], "kwargs": {"three": [3]}}
    assert result.status == TaskResultStatus.READY and result.enqueued_at is not None


@pytest.mark.requirement("TSK-1")
@pytest.mark.parametrize("args,kwargs,why", [
    ([dt.date(2026, 1, 1)], {}, "Unsupported type"),
    ([math.nan], {}, "NaN"),
    ([], {"text": "a\x00b"}, "U+0000"),
    ([], {"text": "\ud800"}, "surrogate"),
    ([{1: "one"}], {}, "keys are strings"),
])
def test_arguments_json_cannot_carry_are_refused_at_enqueue_and_nothing_is_written(args, kwargs, why):
    """TSK-1: refused with InvalidTask (a TypeError too, as Django's own backends raise), never met by a runner."""
    with pytest.raises(InvalidTask) as refused:
        tasks.echo.enqueue(*args, **kwargs)
    assert isinstance(refused.value, TypeError)
    assert why.lower() in str(refused.value).lower()
    assert one("SELECT count(*) FROM runs") == 0


@pytest.mark.requirement("TSK-2")
def test_a_task_enqueued_in_a_transaction_that_rolls_back_never_runs():
    """TSK-2: the run is written on the caller's connection, inside its transaction."""
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = tasks.noop_task.enqueue()
        assert one("SELECT count(*) FROM runs WHERE run_id = %s", [rolled_back.id]) == 1  # written, not yet committed
        raise RuntimeError("the caller's work failed")
    with transaction.atomic():
        committed = tasks.noop_task.enqueue()
    assert one("SELECT count(*) FROM runs WHERE run_id = %s", [rolled_back.id]) == 0
    assert one("SELECT count(*) FROM runs WHERE run_id = %s", [committed.id]) == 1
    with pytest.raises(Exception, match="no task result"):
        task_backends["default"].get_result(rolled_back.id)


@pytest.mark.requirement("TSK-3", "TSK-5")
def test_a_task_runs_in_its_sandbox_and_get_result_reads_it_from_another_process(local_sandboxes):
    """TSK-3, TSK-5: the return value, the times and one worker id per attempt, read by a separate process."""
    result = finish(tasks.echo.enqueue(5, word="six"))
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"args": [5], "kwargs": {"word": "six"}}
    assert result.worker_ids == [worker_id(result.id, 1)] and result.errors == []
    assert result.enqueued_at <= result.last_attempted_at <= result.started_at <= result.finished_at
    probe = ("import django, json; django.setup(); from tests.taskbackend import tasks; "
             f"r = tasks.echo.get_result({result.id!r}); "
             "print(json.dumps([r.status, r.return_value, r.args, r.kwargs, r.worker_ids, r.finished_at.isoformat()]))")
    env = {**os.environ, "DATABASE_URL": current_database_url(), "DJANGO_SETTINGS_MODULE": "config.settings"}
    answer = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_DIR, env=env, capture_output=True, text=True,
                            timeout=60)
    assert answer.returncode == 0, answer.stderr[-2000:]
    assert json.loads(answer.stdout.splitlines()[-1]) == [
        "SUCCESSFUL", {"args": [5], "kwargs": {"word": "six"}}, [5], {"word": "six"}, [worker_id(result.id, 1)],
        result.finished_at.isoformat()]


@pytest.mark.requirement("TSK-4")
def test_an_async_task_is_awaited_in_its_sandbox(local_sandboxes):
    """TSK-4: a coroutine function's result is what it returned after awaiting."""
    assert finish(tasks.add_later.enqueue(20, 22)).return_value == 42


@pytest.mark.requirement("TSK-3")
def test_a_task_that_raises_fails_with_its_exception_class_and_traceback(local_sandboxes):
    """TSK-3: one TaskError naming the exception's class, whose traceback ends with the exception's line."""
    result = finish(tasks.failing_task_value_error.enqueue())
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class is ValueError
    assert error.traceback.endswith("ValueError: This Task failed due to ValueError\n")
    assert "tests/taskbackend/tasks.py" in error.traceback


@pytest.mark.requirement("APP-7")
def test_task_started_and_task_finished_are_sent_in_the_sandbox_around_the_call(local_sandboxes, tmp_path):
    """APP-7: Django's signals reach receivers in the sandbox (and so Django's own RUNNING/SUCCESSFUL/FAILED log
    lines), with the backend as sender and the result as it stands: RUNNING, then SUCCESSFUL or FAILED."""
    folder = tmp_path / "signals"
    folder.mkdir()
    folder.chmod(0o777)  # the sandbox may run as another user
    ok, failed = folder / "ok", folder / "failed"
    succeeded = tasks.echo.enqueue(signals_file=str(ok))
    raised = tasks.fail_after_signals.enqueue(signals_file=str(failed))
    finish(succeeded, raised)
    said = [json.loads(line) for line in ok.read_text().splitlines()]
    assert said == [["started", "SchedulerBackend", succeeded.id, "RUNNING"],
                    ["finished", "SchedulerBackend", succeeded.id, "SUCCESSFUL",
                     {"args": [], "kwargs": {"signals_file": str(ok)}}]]
    said = [json.loads(line) for line in failed.read_text().splitlines()]
    assert said == [["started", "SchedulerBackend", raised.id, "RUNNING"],
                    ["finished", "SchedulerBackend", raised.id, "FAILED", ["builtins.ValueError"]]]
    assert raised.status == TaskResultStatus.FAILED and raised.errors[0].exception_class is ValueError


@pytest.mark.requirement("TSK-4", "TSK-5")
def test_a_task_whose_runner_is_sigkilled_is_retried_and_its_result_read_once(local_sandboxes, tmp_path):
    """TSK-5 (and TSK-4's context): attempt 1's sandbox is killed; the sweep judges it lost; attempt 2 finishes."""
    folder = tmp_path / "hold"
    folder.mkdir()
    folder.chmod(0o777)
    hold = folder / "attempt-1"
    result = tasks.attempt_and_pid.enqueue(str(hold))
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(hold.exists, "attempt 1 running the task")
    assert task_backends["default"].get_result(result.id).status == TaskResultStatus.RUNNING
    sandbox_id = loads(one("SELECT suspension_json FROM runs WHERE run_id = %s", [result.id]))["runtimeSandboxRef"]["sandboxId"]
    os.killpg(int(sandbox_id.split("-")[1]), signal.SIGKILL)
    wait_for(lambda: (reap_children(), liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)))[1]
             .counts["verdicts"], "the runner_lost verdict")
    between = task_backends["default"].get_result(result.id)
    assert between.status == TaskResultStatus.READY and len(between.errors) == 1
    assert between.errors[0].exception_class is TaskRunnerLost
    finish(result)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2, "workers": [worker_id(result.id, 1), worker_id(result.id, 2)]}
    assert result.attempts == 2 and result.errors[0].exception_class is TaskRunnerLost
    assert one("SELECT count(*) FROM outbox WHERE run_id = %s AND event_type = 'run.completed'", [result.id]) == 1


@pytest.mark.requirement("FSH-3", "TSK-4")
def test_priority_orders_an_orgs_tasks():
    """TSK-4 (FSH-3): of one org's queued tasks the higher priority is claimed first, though enqueued later."""
    low = tasks.noop_task.using(priority=-5).enqueue()
    high = tasks.noop_task.using(priority=50).enqueue()
    assert [claim.run_id for claim in lifecycle.claim_queued_runs(1)] == [high.id]
    assert [claim.run_id for claim in lifecycle.claim_queued_runs(1)] == [low.id]
    assert task_backends["default"].get_result(high.id).status == TaskResultStatus.RUNNING


@pytest.mark.requirement("FSH-7", "TSK-4")
def test_run_after_defers_a_task_until_then():
    """TSK-4 (FSH-7): a task enqueued with run_after is not claimed before it."""
    later = tasks.noop_task.using(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).enqueue()
    now = tasks.noop_task.enqueue()
    assert [claim.run_id for claim in lifecycle.claim_queued_runs(10)] == [now.id]
    assert task_backends["default"].get_result(later.id).status == TaskResultStatus.READY
    assert task_backends["default"].get_result(later.id).task.run_after is not None


@pytest.mark.requirement("TSK-1")
def test_the_system_check_names_bad_options_and_unconfigured_providers(settings):
    """TSK-1: OPTIONS are checked at start-up, not at the first enqueue."""
    settings.TASKS = {"default": {"BACKEND": "scheduler.tasks.SchedulerBackend", "QUEUES": ["default", "gpu", "io"],
                                  "OPTIONS": {"colour": "red", "queues": {"gpu": {"provider": "modal"}}}}}
    messages = [str(message) for message in task_backends["default"].check()]
    assert any("unknown key 'colour'" in message for message in messages)
    assert any("queue 'io' has no entry" in message for message in messages)
    settings.TASKS = {"default": {"BACKEND": "scheduler.tasks.SchedulerBackend", "QUEUES": ["default", "gpu"],
                                  "OPTIONS": {"queues": {"gpu": {"provider": "modal", "max_attempts": 0}}}}}
    [problem] = task_backends["default"].check()
    assert problem.level == checks.ERROR and "'max_attempts'" in problem.msg
    settings.TASKS["default"]["OPTIONS"]["queues"]["gpu"]["max_attempts"] = 2
    settings.TASKS = dict(settings.TASKS)
    [problem] = task_backends["default"].check()
    assert "SCHEDULER_MODAL_TOKENS is empty" in problem.msg
    settings.TASKS = TEST_TASKS
    assert task_backends["default"].check() == []


@pytest.mark.requirement("TSK-1")
def test_a_queues_options_are_its_launch_defaults(settings):
    """TSK-1: OPTIONS['queues'] maps a queue to its provider, attempts and concurrency key."""
    settings.TASKS = {"default": {"BACKEND": "scheduler.tasks.SchedulerBackend", "QUEUES": ["default", "gpu"],
                                  "OPTIONS": {"org": "acme", "queues": {"gpu": {
                                      "max_attempts": 2, "concurrency": {"key": "gpu", "limit": 4},
                                      "heartbeat_timeout_ms": 5000}}}}}
    result = tasks.noop_task.using(queue_name="gpu").enqueue()
    row = loads(one("SELECT json_build_array(org_id, max_attempts, concurrency_key, concurrency_limit, "
                    "launch_json -> 'heartbeatTimeoutMs') FROM runs WHERE run_id = %s", [result.id]))
    assert row == ["acme", 2, "gpu", 4, 5000]


@pytest.mark.requirement("TSK-5")
def test_a_tasks_durable_steps__sigkilled_after_the_first__the_retry_runs_only_the_rest(local_sandboxes, tmp_path):
    """TSK-5: `scheduler.sandbox.steps.step` inside a task: attempt 1 finishes step one and is SIGKILLed; the sweep
    judges it lost; attempt 2 returns step one's stored output and runs step two only."""
    folder = tmp_path / "steps"
    folder.mkdir()
    folder.chmod(0o777)  # the sandbox may run as another user
    log, hold = folder / "log", folder / "attempt-1"
    result = tasks.steps_then_killed.enqueue(str(log), str(hold))
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(hold.exists, "attempt 1 past its first step")
    sandbox_id = loads(one("SELECT suspension_json FROM runs WHERE run_id = %s", [result.id]))["runtimeSandboxRef"]["sandboxId"]
    os.killpg(int(hold.read_text()), signal.SIGKILL)
    wait_for(lambda: (reap_children(), liveness.run_once(now=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)))[1]
             .counts["verdicts"], "the runner_lost verdict")
    finish(result)
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value == {"attempt": 2, "steps": ["one", "two"]}
    assert log.read_text().splitlines() == ["one", "two"]  # step one ran once, in attempt 1
    assert sandbox_id.startswith("local-")
