"""Child side of a django.tasks task in its sandbox (TSK-4, TSK-5): set Django up, call the task, write its result.

The runner starts this for a play {"task": "module:function", "settingsModule": ..., "takesContext": ...}. Django
is imported only here and only when a task runs, so the runner itself needs nothing beyond the standard library
for plays that are not tasks. Settings are read with the sandbox's own environment, where
SCHEDULER_TASK_SANDBOX=1 says that no scheduler database or secret is in reach.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

from scheduler.sandbox.protocol import PLAY_START_FAILED, TASK_SANDBOX_VARIABLE, UNSTORABLE_OUTPUT, worker_id
from scheduler.sandbox.runner import MESSAGE_LIMIT, _failure, _traceback_tail, _write
from scheduler.sandbox.storable import unstorable

TRACEBACK_LIMIT = 16 * 1024  # the tail is kept: it ends with the exception's own line, which says the most
TASK_FAILED = "play_failed"  # a task that raised fails like any play; the exception's class rides beside the code


def call_task(task_path: str, output_path: str) -> int:
    """Opened before the task runs, as for a callable play: a task that changes directory still writes here."""
    with open(output_path, "w") as output:
        return _call_task(task_path, output)


def _call_task(task_path: str, output) -> int:
    play = json.loads(os.environ.get("SCHEDULER_PLAY") or "{}")
    try:
        task = load_task(task_path, play.get("settingsModule"))
    except Exception:  # noqa: BLE001 - settings or a module that cannot load is the attempt's result, said at once
        message = f"cannot load task {task_path}:\n{_traceback_tail()}"
        print(f"runner: {message}", file=sys.stderr, flush=True)
        return _write(output, _failure(PLAY_START_FAILED, message))
    arguments = json.loads(os.environ.get("SCHEDULER_PLAY_INPUT") or "null") or {}
    args, kwargs = list(arguments.get("args") or []), dict(arguments.get("kwargs") or {})
    running = _running_result(task, args, kwargs)
    signals = _Signals(task, running)
    try:
        from django.utils.json import normalize_json

        signals.started()
        if play.get("takesContext"):
            from django.tasks import TaskContext

            value = task.call(TaskContext(task_result=running), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = normalize_json(value)  # what Django's own backends keep of a return value, or its TypeError
    except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt too: the task's outcome, said once
        failure = task_failure(exc)
        signals.finished(failed=failure["error"])
        return _write(output, failure)
    found = unstorable(value, "output")
    if found:
        failure = _failure(UNSTORABLE_OUTPUT, f"the task's {found[0]} {found[1]}")
        signals.finished(failed=failure["error"])
        return _write(output, failure)
    signals.finished(value=value)
    return _write(output, {"ok": True, "output": value})


def load_task(task_path: str, settings_module: str | None):
    """Django set up with the enqueuing process's settings module, then the Task object at `task_path`."""
    os.environ[TASK_SANDBOX_VARIABLE] = "1"
    if settings_module:
        os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    import django
    from django.tasks import Task

    django.setup()
    module_name, _, name = task_path.partition(":")
    task = getattr(importlib.import_module(module_name), name)
    if not isinstance(task, Task):
        raise TypeError(f"{task_path} is not a django.tasks Task (decorate it with @task)")
    return task


def _running_result(task, args: list, kwargs: dict):
    """The task's result as it stands while this attempt runs: what a takes_context task's context carries and
    what task_started and task_finished are sent with. Its attempts are the run's (TSK-4)."""
    from django.tasks import TaskResult, TaskResultStatus
    from django.utils import timezone

    run_id, attempt = os.environ.get("SCHEDULER_RUN_ID", ""), int(os.environ.get("SCHEDULER_ATTEMPT") or 1)
    now = timezone.now()
    return TaskResult(task=task, id=run_id, status=TaskResultStatus.RUNNING, enqueued_at=None, started_at=now,
                      finished_at=None, last_attempted_at=now, args=args, kwargs=kwargs, backend=task.backend,
                      errors=[], worker_ids=[worker_id(run_id, number) for number in range(1, attempt + 1)])


class _Signals:
    """Django's task_started and task_finished, sent here around the call as Django's own backends send them, so
    Django's RUNNING, SUCCESSFUL and FAILED log lines and a project's own receivers run (APP-7). A receiver that
    raises is logged by the signal's robust send and changes nothing about the task's result."""

    def __init__(self, task, result):
        self.result = result
        try:
            self.sender = type(task.get_backend())
        except Exception:  # noqa: BLE001 - a backend this sandbox cannot build still runs the task; no signals then
            self.sender = None

    def started(self) -> None:
        if self.sender is not None:
            from django.tasks.signals import task_started

            task_started.send_robust(self.sender, task_result=self.result)

    def finished(self, *, value=None, failed: dict | None = None) -> None:
        if self.sender is None:
            return
        from django.tasks import TaskResultStatus
        from django.tasks.base import TaskError
        from django.tasks.signals import task_finished
        from django.utils import timezone

        object.__setattr__(self.result, "finished_at", timezone.now())
        if failed is None:
            object.__setattr__(self.result, "status", TaskResultStatus.SUCCESSFUL)
            object.__setattr__(self.result, "_return_value", value)
        else:
            object.__setattr__(self.result, "status", TaskResultStatus.FAILED)
            self.result.errors.append(TaskError(exception_class_path=failed.get("exceptionClassPath") or "",
                                                traceback=failed.get("traceback") or failed.get("message") or ""))
        task_finished.send_robust(self.sender, task_result=self.result)


def _storable_text(text: str) -> str:
    """Text PostgreSQL can keep: no NUL, no lone surrogate (a message may quote any input)."""
    return text.encode("utf-8", errors="replace").decode("utf-8").replace("\x00", "")


def task_failure(exc: BaseException) -> dict:
    """The failed result of a task that raised: what TaskError needs (the class path and the traceback)."""
    kind = type(exc)
    failure = _failure(TASK_FAILED, _storable_text(f"{kind.__name__}: {exc}")[-MESSAGE_LIMIT:])
    failure["error"]["exceptionClassPath"] = f"{kind.__module__}.{kind.__qualname__}"
    failure["error"]["traceback"] = _storable_text("".join(traceback.format_exception(exc)))[-TRACEBACK_LIMIT:]
    return failure
