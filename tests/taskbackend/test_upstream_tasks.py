"""TSK-6, APP-7: Django 6.1.3's `tests/tasks/test_tasks.py`, run against this backend.

The cases of django/django at tag 6.1.3 (BSD licence), one function per upstream method and named as it.
Upstream runs them on the dummy backend (results kept in a list) with an immediate backend as "immediate"; here
the default backend is this one and its runs stay queued (no dispatcher runs in these cases), so a result is
READY as the dummy backend's are. An `async def` case runs its body inside an event loop (`async_to_sync`).

Changed, and why:
- `test_using_correct_backend`: asserts SchedulerBackend instead of DummyBackend.
- `test_enqueue_task`, `test_enqueue_task_async`: `default_task_backend.results == [result]` (the dummy
  backend's list) is read as `get_result(result.id) == result`.
- `test_refresh_result`, `test_get_missing_result` (async upstream): their synchronous `refresh()` and
  `get_result()` run outside the event loop. Inside one Django refuses a synchronous database query
  (SynchronousOnlyOperation), which the dummy backend never makes; the async forms run inside it, as upstream.
- `test_unknown_queue_name`: the backend with empty QUEUES is this backend with QUEUES [], not the immediate one.
- `test_invalid_function`: `self.test_invalid_function` (a bound method) is a nested function here.
- `test_module_path`: the tasks module is tests.taskbackend.tasks, not tasks.tasks.

Left out, and why: `test_task_decorator`, `test_using_unknown_backend`, `test_using_missing_backend`,
`test_using_creates_new_instance`, `test_chained_using`, `test_call_task`, `test_call_task_async`,
`test_call_async_task`, `test_call_async_task_sync`, `test_get_backend`, `test_unpickle_arbitrary_string`,
`test_unpickle_non_task_object`, `test_no_backends`, `test_task_error_invalid_exception`,
`test_task_error_unknown_module`: they exercise django.tasks itself (Task, the backend handler, TaskError)
with the dummy and immediate backends, and do not depend on the backend under test.
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
from tests.taskbackend.support import TEST_TASKS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def task_settings(settings):
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["default", "queue_1"]},
                      "immediate": {**TEST_TASKS["default"], "QUEUES": []}}
    settings.USE_TZ = True


@pytest.mark.requirement("TSK-6")
def test_using_correct_backend():
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], SchedulerBackend)


@pytest.mark.requirement("TSK-6")
def test_enqueue_task():
    result = test_tasks.noop_task.enqueue()
    assert result.status == TaskResultStatus.READY
    assert result.task == test_tasks.noop_task
    assert (result.args, result.kwargs) == ([], {})
    assert default_task_backend.get_result(result.id) == result


@pytest.mark.requirement("TSK-6")
def test_enqueue_task_async():
    async def case():
        result = await test_tasks.noop_task.aenqueue()
        assert result.status == TaskResultStatus.READY
        assert result.task == test_tasks.noop_task
        assert (result.args, result.kwargs) == ([], {})
        assert await default_task_backend.aget_result(result.id) == result

    async_to_sync(case)()


@pytest.mark.requirement("TSK-6")
def test_enqueue_with_invalid_argument():
    with pytest.raises(TypeError, match="Unsupported type"):
        test_tasks.noop_task.enqueue(dt.datetime.now())


@pytest.mark.requirement("TSK-6")
def test_aenqueue_with_invalid_argument():
    async def case():
        with pytest.raises(TypeError, match="Unsupported type"):
            await test_tasks.noop_task.aenqueue(dt.datetime.now())

    async_to_sync(case)()


@pytest.mark.requirement("TSK-6")
def test_using_priority():
    assert test_tasks.noop_task.priority == 0
    assert test_tasks.noop_task.using(priority=1).priority == 1
    assert test_tasks.noop_task.priority == 0


@pytest.mark.requirement("TSK-6")
def test_using_queue_name():
    assert test_tasks.noop_task.queue_name == DEFAULT_TASK_QUEUE_NAME
    assert test_tasks.noop_task.using(queue_name="queue_1").queue_name == "queue_1"
    assert test_tasks.noop_task.queue_name == DEFAULT_TASK_QUEUE_NAME


@pytest.mark.requirement("TSK-6")
def test_using_run_after():
    now = timezone.now()
    assert test_tasks.noop_task.run_after is None
    assert test_tasks.noop_task.using(run_after=now).run_after == now
    assert test_tasks.noop_task.run_after is None


@pytest.mark.requirement("TSK-6")
def test_refresh_result():
    async def enqueue_and_refresh():
        result = await test_tasks.noop_task.aenqueue()
        original = dataclasses.asdict(result)
        await result.arefresh()
        assert dataclasses.asdict(result) == original
        return result, original

    result, original = async_to_sync(enqueue_and_refresh)()
    result.refresh()  # outside the event loop: see the module's docstring
    assert dataclasses.asdict(result) == original


@pytest.mark.requirement("TSK-6")
def test_naive_datetime():
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime."):
        test_tasks.noop_task.using(run_after=dt.datetime.now())


@pytest.mark.requirement("TSK-6")
def test_invalid_priority():
    message = f"priority must be a whole number between {TASK_MIN_PRIORITY} and {TASK_MAX_PRIORITY}."
    for priority in (-101, 101, 3.1):
        with pytest.raises(InvalidTask, match=message):
            test_tasks.noop_task.using(priority=priority)
    test_tasks.noop_task.using(priority=100)
    test_tasks.noop_task.using(priority=-100)
    test_tasks.noop_task.using(priority=0)


@pytest.mark.requirement("TSK-6")
def test_unknown_queue_name():
    with pytest.raises(InvalidTask, match="Queue 'queue-2' is not valid for backend."):
        test_tasks.noop_task.using(queue_name="queue-2")
    # Validation is bypassed when the backend QUEUES is an empty list.
    assert test_tasks.noop_task.using(queue_name="queue-2", backend="immediate").queue_name == "queue-2"


@pytest.mark.requirement("TSK-6")
def test_get_result():
    result = default_task_backend.enqueue(test_tasks.noop_task, (), {})
    assert test_tasks.noop_task.get_result(result.id) == result


@pytest.mark.requirement("TSK-6")
def test_get_result_async():
    async def case():
        result = await default_task_backend.aenqueue(test_tasks.noop_task, (), {})
        assert await test_tasks.noop_task.aget_result(result.id) == result

    async_to_sync(case)()


@pytest.mark.requirement("TSK-6")
def test_get_missing_result():
    with pytest.raises(TaskResultDoesNotExist):  # outside the event loop: see the module's docstring
        test_tasks.noop_task.get_result("123")

    async def case():
        with pytest.raises(TaskResultDoesNotExist):
            await test_tasks.noop_task.aget_result("123")

    async_to_sync(case)()


@pytest.mark.requirement("TSK-6")
def test_get_incorrect_result():
    result = default_task_backend.enqueue(test_tasks.noop_task_async, (), {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        test_tasks.noop_task.get_result(result.id)


@pytest.mark.requirement("TSK-6")
def test_get_incorrect_result_async():
    async def case():
        result = await default_task_backend.aenqueue(test_tasks.noop_task_async, (), {})
        with pytest.raises(TaskResultMismatch, match="Task does not match"):
            await test_tasks.noop_task.aget_result(result.id)

    async_to_sync(case)()


def _nested():
    def inner():
        return None

    return inner


@pytest.mark.requirement("TSK-6")
def test_invalid_function():
    for invalid_function in [any, _nested()]:
        with pytest.raises(InvalidTask, match="Task function must be defined at a module level."):
            task()(invalid_function)


@pytest.mark.requirement("TSK-6")
def test_name():
    assert test_tasks.noop_task.name == "noop_task"
    assert test_tasks.noop_task_async.name == "noop_task_async"


@pytest.mark.requirement("TSK-6")
def test_module_path():
    assert test_tasks.noop_task.module_path == "tests.taskbackend.tasks.noop_task"
    assert test_tasks.noop_task_async.module_path == "tests.taskbackend.tasks.noop_task_async"
    assert import_string(test_tasks.noop_task.module_path) is test_tasks.noop_task
    assert import_string(test_tasks.noop_task_async.module_path) is test_tasks.noop_task_async


@pytest.mark.requirement("TSK-6")
def test_pickle_task():
    assert pickle.loads(pickle.dumps(test_tasks.noop_task)) == test_tasks.noop_task


@pytest.mark.requirement("TSK-6")
def test_pickle_task_result():
    result = test_tasks.noop_task.enqueue()
    assert pickle.loads(pickle.dumps(result)) == result


@pytest.mark.requirement("TSK-6")
def test_takes_context_without_taking_context():
    with pytest.raises(InvalidTask, match="Task takes context but does not have a first argument of 'context'."):
        task(takes_context=True)(test_tasks.calculate_meaning_of_life.func)


@pytest.mark.requirement("TSK-6")
def test_run_after_in_decorator():
    with pytest.raises(TypeError, match="run_after cannot be defined statically with the @task decorator."):
        task(run_after=timezone.now())(test_tasks.calculate_meaning_of_life.func)
