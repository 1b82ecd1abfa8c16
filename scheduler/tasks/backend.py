"""SchedulerBackend: Django's task framework on this scheduler (TSK-1..4).

`enqueue` is a launch (RUN-1): the task's `module:function` is the play, its arguments the input, the queue's
OPTIONS the launch defaults, its priority and run_after the run's (FSH-3, FSH-7). The run is inserted on Django's
`default` connection, so inside the caller's `transaction.atomic()` it exists only if the caller commits (TSK-2).
A runner in the run's sandbox calls the task (sandbox/task_call.py); `get_result` reads the run back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core import checks
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask
from django.tasks.signals import task_enqueued
from django.utils.json import normalize_json

from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.runs import lifecycle
from scheduler.tasks import options, results


class InvalidTaskArguments(InvalidTask, TypeError):
    """Arguments JSON cannot carry (or PostgreSQL cannot store): refused at enqueue, never found by the runner.

    A TypeError too, as Django's own backends raise for an unsupported argument type.
    """


class SchedulerBackend(BaseTaskBackend):
    supports_defer = True  # run_after: never claimed before it (FSH-7)
    supports_async_task = True  # the runner awaits a coroutine function
    supports_get_result = True  # the run is the result, readable from any process
    supports_priority = True  # the run's priority within its org (FSH-3)

    def enqueue(self, task, args, kwargs) -> TaskResult:
        self.validate_task(task)
        arguments = task_arguments(args, kwargs)
        try:
            request = options.parse(options.launch_body_for(task, arguments, self.options))
        except InvalidInput as error:
            raise InvalidTask(error.message) from None
        launched = lifecycle.launch_run(request)
        result = TaskResult(task=task, id=launched.run_id, status=TaskResultStatus.READY,
                            enqueued_at=launched.created_at, started_at=None, finished_at=None,
                            last_attempted_at=None, args=arguments["args"], kwargs=arguments["kwargs"],
                            backend=self.alias, errors=[], worker_ids=[])
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id) -> TaskResult:
        return results.read_result(result_id, self.alias)

    def check(self, **kwargs):
        found = [checks.Error(f"TASKS[{self.alias!r}]: {problem}", id="scheduler.E301")
                 for problem in options.problems(self.options, self.queues)]
        named = (self.options.get("queues") or {}) if isinstance(self.options, dict) else {}
        found += [checks.Warning(f"TASKS[{self.alias!r}]: queue {queue!r} has no entry in OPTIONS['queues']",
                                 hint="its tasks run with the backend's top-level OPTIONS", id="scheduler.W301")
                  for queue in sorted(self.queues) if queue != "default" and queue not in named]
        return found


def task_arguments(args: Sequence, kwargs: Mapping) -> dict[str, Any]:
    """{"args": [...], "kwargs": {...}} as the run's input, or InvalidTaskArguments naming what is wrong."""
    try:
        arguments = {"args": normalize_json(list(args)), "kwargs": normalize_json(dict(kwargs))}
    except (TypeError, ValueError) as error:
        raise InvalidTaskArguments(f"{error}: a task's arguments must be JSON") from None
    try:
        validation.storable(arguments, "input")
    except InvalidInput as error:
        raise InvalidTaskArguments(f"Unsupported value: {error.message}") from None
    return arguments
