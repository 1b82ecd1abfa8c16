"""TSK-6: the cases of Django's own task tests that apply to this backend, run against it.

Adapted from django/django `tests/tasks/test_immediate_backend.py` and `tests/tasks/test_tasks.py` (Django 6.1,
BSD licence), with the functions of their `tasks.py` in tests/taskbackend/tasks.py. The only change to a case:
where Django's immediate backend has finished a task when `enqueue` returns, these wait for the run to finish
(`finish`), and where the dummy backend keeps results in a list, these read the run back with `get_result`.

Left out, and why:
- `test_cannot_get_result`, `test_cannot_refresh_result`, `test_cannot_pass_run_after`: they show flags this
  backend sets the other way (TSK-4); test_backend.py shows get_result, refresh and run_after working.
- `test_throws_keyboard_interrupt`: the task runs in its sandbox, not in the enqueuing process; there a
  KeyboardInterrupt is the attempt's failure like any other exception (`test_catches_exception` covers it).
- `test_enqueue_logs`, `test_failed_logs`, `test_successful_task_no_none_type_in_logs` and the log assertions of
  `test_catches_exception`: task_started and task_finished are sent in the sandbox, where the task runs, so their
  log lines are in the runner's log, not the test process's (test_backend.py shows both signals reaching a
  receiver there); this backend sends task_enqueued where it enqueues.
- `test_doesnt_wait_until_transaction_commit_by_default`: this backend is transactional by design (TSK-2);
  test_backend.py shows a rolled-back enqueue never running.
- `test_using_unknown_backend`, `test_using_missing_backend`, `test_get_backend`, `test_no_backends`,
  `test_task_error_invalid_exception`, `test_task_error_unknown_module`, `test_unpickle_*`, `test_call_*`,
  `test_task_decorator`, `test_chained_using`, `test_using_creates_new_instance`: they exercise django.tasks
  itself (the handler, Task.call, TaskError) with the dummy or immediate backend, not a backend's behaviour.
- The TaskResult hashing, ordering and equality cases of Django's main branch: TaskResult in Django 6.1 (the
  release this project pins) has no such behaviour.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import pickle

import pytest
from asgiref.sync import async_to_sync
from django.tasks import DEFAULT_TASK_QUEUE_NAME, TaskResultStatus, default_task_backend, task, task_backends
from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
from django.utils import timezone
from django.utils.module_loading import import_string

from scheduler.tasks import SchedulerBackend
from tests.taskbackend import tasks as test_tasks
from tests.taskbackend.support import TEST_TASKS, finish

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


# test_immediate_backend.py


def test_using_correct_backend():
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], SchedulerBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == TEST_TASKS["default"]["OPTIONS"]


@pytest.mark.parametrize("task_function", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task(local_sandboxes, task_function):
    result = finish(task_function.enqueue(1, two=3))
    assert result.status == TaskResultStatus.SUCCESSFUL
    _assert_finished_in_order(result)
    assert result.return_value is None
    assert result.task == task_function
    assert (result.args, result.kwargs, result.attempts) == ([1], {"two": 3}, 1)


@pytest.mark.parametrize("task_function", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task_async(local_sandboxes, task_function):
    result = finish(async_to_sync(task_function.aenqueue)())
    assert result.status == TaskResultStatus.SUCCESSFUL
    _assert_finished_in_order(result)
    assert result.return_value is None
    assert result.task == task_function
    assert (result.args, result.kwargs, result.attempts) == ([], {}, 1)


@pytest.mark.parametrize("task_function,exception,message", [
    (test_tasks.failing_task_value_error, ValueError, "This Task failed due to ValueError"),
    (test_tasks.failing_task_system_exit, SystemExit, "This Task failed due to SystemExit"),
])
def test_catches_exception(local_sandboxes, task_function, exception, message):
    result = finish(task_function.enqueue())
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value
    _assert_finished_in_order(result)
    assert result.errors[0].exception_class is exception
    assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n"), result.errors[0].traceback
    assert result.task == task_function
    assert (result.args, result.kwargs) == ([], {})


def test_complex_exception(local_sandboxes):
    result = finish(test_tasks.complex_exception.enqueue())
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value
    _assert_finished_in_order(result)
    assert result._return_value is None
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback
    assert result.task == test_tasks.complex_exception
    assert (result.args, result.kwargs) == ([], {})


def test_complex_return_value(local_sandboxes):
    result = finish(test_tasks.complex_return_value.enqueue())
    assert result.status == TaskResultStatus.FAILED
    _assert_finished_in_order(result)
    assert result._return_value is None
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback


def test_result(local_sandboxes):
    result = finish(default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {}))
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def test_result_async(local_sandboxes):
    result = finish(async_to_sync(default_task_backend.aenqueue)(test_tasks.calculate_meaning_of_life, [], {}))
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def test_takes_context(local_sandboxes):
    result = finish(test_tasks.get_task_id.enqueue())
    assert result.return_value == result.id


def test_context(local_sandboxes):
    result = finish(test_tasks.check_context.enqueue(1))
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_validate_on_enqueue(settings):
    task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["queue-1"]}}
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        task_with_custom_queue_name.enqueue()


def test_validate_on_aenqueue(settings):
    task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["queue-1"]}}
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        async_to_sync(task_with_custom_queue_name.aenqueue)()


# test_tasks.py


def test_enqueue_task_is_ready():
    result = test_tasks.noop_task.enqueue()
    assert result.status == TaskResultStatus.READY
    assert result.task == test_tasks.noop_task
    assert (result.args, result.kwargs) == ([], {})
    assert default_task_backend.get_result(result.id) == result


def test_aenqueue_task_is_ready():
    result = async_to_sync(test_tasks.noop_task.aenqueue)()
    assert result.status == TaskResultStatus.READY
    assert result.task == test_tasks.noop_task
    assert default_task_backend.get_result(result.id) == result


def test_enqueue_with_invalid_argument():
    with pytest.raises(TypeError, match="Unsupported type"):
        test_tasks.noop_task.enqueue(dt.datetime.now())


def test_aenqueue_with_invalid_argument():
    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(test_tasks.noop_task.aenqueue)(dt.datetime.now())


def test_using_priority():
    assert test_tasks.noop_task.priority == 0
    assert test_tasks.noop_task.using(priority=1).priority == 1
    assert test_tasks.noop_task.priority == 0


def test_using_queue_name():
    assert test_tasks.noop_task.queue_name == DEFAULT_TASK_QUEUE_NAME
    assert test_tasks.noop_task.using(queue_name="queue_1").queue_name == "queue_1"
    assert test_tasks.noop_task.queue_name == DEFAULT_TASK_QUEUE_NAME


def test_using_run_after():
    now = timezone.now()
    assert test_tasks.noop_task.run_after is None
    assert test_tasks.noop_task.using(run_after=now).run_after == now
    assert test_tasks.noop_task.run_after is None


def test_refresh_result():
    result = async_to_sync(test_tasks.noop_task.aenqueue)()
    original_result = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == original_result
    async_to_sync(result.arefresh)()
    assert dataclasses.asdict(result) == original_result


def test_naive_datetime():
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime."):
        test_tasks.noop_task.using(run_after=dt.datetime.now())


@pytest.mark.parametrize("priority", [-101, 101, 3.1])
def test_invalid_priority(priority):
    with pytest.raises(InvalidTask, match=f"priority must be a whole number between {TASK_MIN_PRIORITY} and "
                                          f"{TASK_MAX_PRIORITY}."):
        test_tasks.noop_task.using(priority=priority)


def test_valid_priorities():
    for priority in (100, -100, 0):
        test_tasks.noop_task.using(priority=priority)


def test_unknown_queue_name(settings):
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["default", "queue_1"]},
                      "open": {**TEST_TASKS["default"], "QUEUES": []}}
    with pytest.raises(InvalidTask, match="Queue 'queue-2' is not valid for backend."):
        test_tasks.noop_task.using(queue_name="queue-2")
    # Validation is bypassed when the backend's QUEUES is an empty list.
    assert test_tasks.noop_task.using(queue_name="queue-2", backend="open").queue_name == "queue-2"


def test_get_result():
    result = default_task_backend.enqueue(test_tasks.noop_task, (), {})
    assert test_tasks.noop_task.get_result(result.id) == result


def test_get_result_async():
    result = async_to_sync(default_task_backend.aenqueue)(test_tasks.noop_task, (), {})
    assert async_to_sync(test_tasks.noop_task.aget_result)(result.id) == result


def test_get_missing_result():
    with pytest.raises(TaskResultDoesNotExist):
        test_tasks.noop_task.get_result("123")
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(test_tasks.noop_task.aget_result)("123")


def test_get_incorrect_result():
    result = default_task_backend.enqueue(test_tasks.noop_task_async, (), {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        test_tasks.noop_task.get_result(result.id)


def test_get_incorrect_result_async():
    result = async_to_sync(default_task_backend.aenqueue)(test_tasks.noop_task_async, (), {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        async_to_sync(test_tasks.noop_task.aget_result)(result.id)


def _nested():
    def inner():
        return None

    return inner


@pytest.mark.parametrize("invalid_function", [any, _nested()])  # upstream uses a bound method: not module-level
def test_invalid_function(invalid_function):
    with pytest.raises(InvalidTask, match="Task function must be defined at a module level."):
        task()(invalid_function)


def test_name():
    assert test_tasks.noop_task.name == "noop_task"
    assert test_tasks.noop_task_async.name == "noop_task_async"


def test_module_path():
    assert test_tasks.noop_task.module_path == "tests.taskbackend.tasks.noop_task"
    assert test_tasks.noop_task_async.module_path == "tests.taskbackend.tasks.noop_task_async"
    assert import_string(test_tasks.noop_task.module_path) is test_tasks.noop_task
    assert import_string(test_tasks.noop_task_async.module_path) is test_tasks.noop_task_async


def test_pickle_task():
    assert pickle.loads(pickle.dumps(test_tasks.noop_task)) == test_tasks.noop_task


def test_pickle_task_result():
    result = test_tasks.noop_task.enqueue()
    assert pickle.loads(pickle.dumps(result)) == result


def test_takes_context_without_taking_context():
    with pytest.raises(InvalidTask, match="Task takes context but does not have a first argument of 'context'."):
        task(takes_context=True)(test_tasks.calculate_meaning_of_life.func)


def test_run_after_in_decorator():
    with pytest.raises(TypeError, match="run_after cannot be defined statically with the @task decorator."):
        task(run_after=timezone.now())(test_tasks.calculate_meaning_of_life.func)
