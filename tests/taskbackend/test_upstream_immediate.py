"""TSK-6, APP-7: Django 6.1.3's `tests/tasks/test_immediate_backend.py`, run against this backend.

The cases of django/django at tag 6.1.3 (BSD licence), one function per upstream method and named as it, with
the functions of the upstream `tasks.py` in tests/taskbackend/tasks.py. Django's immediate backend has run a task
when `enqueue` returns; this backend runs it in a sandbox. So, throughout: a case that reads a finished result
waits for the run (`finish`); `subTest` loops are parametrized; an `async def` case runs its body inside an
event loop (`async_to_sync`), where Django refuses synchronous database access, as in an async view.

Changed, and why:
- `test_using_correct_backend`: asserts SchedulerBackend and its OPTIONS instead of ImmediateBackend and {}.
- The log assertions (`test_catches_exception`, `test_complex_exception`, `test_complex_return_value`,
  `test_enqueue_logs`, `test_failed_logs`, `test_successful_task_no_none_in_logs`): task_started and
  task_finished are sent in the sandbox, around the call (APP-7), so Django's RUNNING, SUCCESSFUL and FAILED
  lines are read from the sandbox's runner log (`sandbox_log_records`); the "enqueued" line is logged where the
  task is enqueued, so it is captured there (caplog). The assertions themselves are upstream's.
- `test_context`: the task upstream calls `test_context` is `check_context` here (pytest would collect it).
- `test_validate_on_enqueue`, `test_validate_on_aenqueue`: the QUEUES override keeps this backend.

Left out, and why:
- `test_throws_keyboard_interrupt`: the task runs in its sandbox, not in the enqueuing process; there a
  KeyboardInterrupt fails the attempt like any exception, which `test_catches_exception` covers.
- `test_cannot_get_result`, `test_cannot_refresh_result`, `test_cannot_pass_run_after`: they show the immediate
  backend's flags, which this backend sets the other way (TSK-4); test_backend.py shows each working.
- `test_doesnt_wait_until_transaction_commit_by_default`: this backend enqueues in the caller's transaction by
  design (TSK-2); test_backend.py shows a rolled-back enqueue never running.
"""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import async_to_sync
from django.tasks import TaskResultStatus, default_task_backend, task_backends
from django.tasks.exceptions import InvalidTask

from scheduler.tasks import SchedulerBackend
from tests.taskbackend import tasks as test_tasks
from tests.taskbackend.support import TEST_TASKS, finish, sandbox_log_records

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def task_settings(settings):
    settings.TASKS = TEST_TASKS
    settings.USE_TZ = True


def _assert_finished_in_order(result):
    assert result.is_finished is True
    assert result.started_at is not None and result.last_attempted_at is not None and result.finished_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at


def _errors(result) -> list[str]:
    """What assertLogs("django.tasks", level="ERROR") captures upstream: the sandbox's ERROR records."""
    return [record for record in sandbox_log_records(result) if " ERROR django.tasks " in record.split("\n", 1)[0]]


@pytest.mark.requirement("TSK-6")
def test_using_correct_backend():
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], SchedulerBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == TEST_TASKS["default"]["OPTIONS"]


@pytest.mark.requirement("TSK-6")
@pytest.mark.parametrize("task_function", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task(local_sandboxes, task_function):
    result = finish(task_function.enqueue(1, two=3))
    assert result.status == TaskResultStatus.SUCCESSFUL
    _assert_finished_in_order(result)
    assert result.return_value is None
    assert result.task == task_function
    assert (result.args, result.kwargs, result.attempts) == ([1], {"two": 3}, 1)


@pytest.mark.requirement("TSK-6")
@pytest.mark.parametrize("task_function", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task_async(local_sandboxes, task_function):
    async def case():
        return await task_function.aenqueue()

    result = finish(async_to_sync(case)())
    assert result.status == TaskResultStatus.SUCCESSFUL
    _assert_finished_in_order(result)
    assert result.return_value is None
    assert result.task == task_function
    assert (result.args, result.kwargs, result.attempts) == ([], {}, 1)


@pytest.mark.requirement("TSK-6")
@pytest.mark.parametrize("task_function,exception,message", [
    (test_tasks.failing_task_value_error, ValueError, "This Task failed due to ValueError"),
    (test_tasks.failing_task_system_exit, SystemExit, "This Task failed due to SystemExit"),
])
def test_catches_exception(local_sandboxes, task_function, exception, message):
    result = finish(task_function.enqueue())
    captured = _errors(result)
    assert len(captured) == 1
    assert message in captured[0]
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value
    _assert_finished_in_order(result)
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n"), result.errors[0].traceback
    assert result.task == task_function
    assert (result.args, result.kwargs) == ([], {})


@pytest.mark.requirement("TSK-6")
def test_complex_exception(local_sandboxes):
    result = finish(test_tasks.complex_exception.enqueue())
    assert _errors(result)
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value
    _assert_finished_in_order(result)
    assert result._return_value is None
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback
    assert result.task == test_tasks.complex_exception
    assert (result.args, result.kwargs) == ([], {})


@pytest.mark.requirement("TSK-6")
def test_complex_return_value(local_sandboxes):
    result = finish(test_tasks.complex_return_value.enqueue())
    assert _errors(result)
    assert result.status == TaskResultStatus.FAILED
    _assert_finished_in_order(result)
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback


@pytest.mark.requirement("TSK-6")
def test_result(local_sandboxes):
    result = finish(default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {}))
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


@pytest.mark.requirement("TSK-6")
def test_result_async(local_sandboxes):
    async def case():
        return await default_task_backend.aenqueue(test_tasks.calculate_meaning_of_life, [], {})

    result = finish(async_to_sync(case)())
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def _logged(caplog, result) -> list[str]:
    """What assertLogs("django.tasks", level="DEBUG") captures upstream: the enqueuing process's lines, then the
    sandbox's."""
    here = [record.getMessage() for record in caplog.records if record.name == "django.tasks"]
    return here + sandbox_log_records(result)


@pytest.mark.requirement("TSK-6")
def test_enqueue_logs(local_sandboxes, caplog):
    caplog.set_level(logging.DEBUG, logger="django.tasks")
    result = finish(test_tasks.noop_task.enqueue())
    captured = _logged(caplog, result)
    assert len(captured) == 3
    assert "enqueued" in captured[0] and result.id in captured[0]
    assert "state=RUNNING" in captured[1] and result.id in captured[1]
    assert "state=SUCCESSFUL" in captured[2] and result.id in captured[2]


@pytest.mark.requirement("TSK-6")
def test_failed_logs(local_sandboxes, caplog):
    caplog.set_level(logging.DEBUG, logger="django.tasks")
    result = finish(test_tasks.failing_task_value_error.enqueue())
    captured = _logged(caplog, result)
    assert len(captured) == 3
    assert "state=RUNNING" in captured[1] and result.id in captured[1]
    assert "state=FAILED" in captured[2] and result.id in captured[2]


@pytest.mark.requirement("TSK-6")
def test_successful_task_no_none_in_logs(local_sandboxes, caplog):
    caplog.set_level(logging.DEBUG, logger="django.tasks")
    result = finish(test_tasks.noop_task.enqueue())
    assert result.status == TaskResultStatus.SUCCESSFUL
    for log_output in _logged(caplog, result):
        assert "None" not in log_output


@pytest.mark.requirement("TSK-6")
def test_takes_context(local_sandboxes):
    result = finish(test_tasks.get_task_id.enqueue())
    assert result.return_value == result.id


@pytest.mark.requirement("TSK-6")
def test_context(local_sandboxes):
    result = finish(test_tasks.check_context.enqueue(1))
    assert result.status == TaskResultStatus.SUCCESSFUL


@pytest.mark.requirement("TSK-6")
def test_validate_on_enqueue(settings):
    task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["queue-1"]}}
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        task_with_custom_queue_name.enqueue()


@pytest.mark.requirement("TSK-6")
def test_validate_on_aenqueue(settings):
    task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["queue-1"]}}

    async def case():
        await task_with_custom_queue_name.aenqueue()

    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        async_to_sync(case)()
