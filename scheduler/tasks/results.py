"""A task's run read back as Django's TaskResult, from any process (TSK-3).

Status: READY while queued (also between attempts), RUNNING from claim to verdict, SUCCESSFUL when completed,
FAILED when failed or cancelled. One TaskError per failed attempt; one worker id per attempt.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.tasks import DEFAULT_TASK_QUEUE_NAME, Task, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist

from scheduler import db
from scheduler.kinds import AttemptStatus, RunStatus
from scheduler.sandbox.protocol import worker_id
from scheduler.tasks.exceptions import BY_CODE, TaskAttemptError, class_path

STATUS = {
    RunStatus.QUEUED: TaskResultStatus.READY,
    RunStatus.RUNNING: TaskResultStatus.RUNNING,
    RunStatus.WAITING: TaskResultStatus.RUNNING,
    RunStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    RunStatus.FAILED: TaskResultStatus.FAILED,
    RunStatus.CANCELLED: TaskResultStatus.FAILED,
}
FAILED_ATTEMPTS = (AttemptStatus.FAILED, AttemptStatus.CANCELLED)


def read_result(result_id: Any, alias: str) -> TaskResult:
    row = db.fetch_one("tasks_read_result", {"run_id": str(result_id)})
    play = row["play"] if row is not None else None
    if not isinstance(play, dict) or "task" not in play:
        raise TaskResultDoesNotExist(f"no task result {str(result_id)[:80]!r}")
    status = STATUS[RunStatus(row["status"])]
    arguments = row["input_json"] if isinstance(row["input_json"], dict) else {}
    result = TaskResult(
        task=_task(play, row), id=row["run_id"], status=status, enqueued_at=row["created_at"],
        started_at=row["started_at"], finished_at=row["finished_at"], last_attempted_at=row["last_attempted_at"],
        args=arguments.get("args", []), kwargs=arguments.get("kwargs", {}), backend=alias,
        errors=_errors(row["attempts"], row["terminal_result_json"], status),
        worker_ids=[worker_id(row["run_id"], attempt["attempt"]) for attempt in row["attempts"]],
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", (row["terminal_result_json"] or {}).get("output"))
    return result


def _task(play: dict, row: dict):
    """The Task as it was enqueued: the module's Task with the run's priority, queue, run_after and backend."""
    module_name, _, name = play["task"].partition(":")
    try:
        task = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"Expected {play['task']!r} to point to a Task instance.") from error
    if not isinstance(task, Task):
        raise ValueError(f"Expected {play['task']!r} to point to a Task instance.")
    return task.using(priority=row["priority"], queue_name=play.get("queueName") or DEFAULT_TASK_QUEUE_NAME,
                      run_after=row["run_after"], backend=play.get("backend") or task.backend)


def _errors(attempts: list[dict], terminal: dict | None, status: TaskResultStatus) -> list[TaskError]:
    errors = [task_error(attempt["error"] or (terminal or {}).get("error") or {})
              for attempt in attempts if attempt["status"] in FAILED_ATTEMPTS]
    if status == TaskResultStatus.FAILED and not errors:  # cancelled while queued: no attempt, still a reason
        errors.append(task_error((terminal or {}).get("error") or {}))
    return errors


def task_error(error: dict) -> TaskError:
    """The task's own exception when it raised one; else the scheduler's reason as a TaskAttemptError class."""
    if error.get("exceptionClassPath"):
        return TaskError(exception_class_path=error["exceptionClassPath"],
                         traceback=error.get("traceback") or error.get("message") or "")
    code = error.get("code") or "failed"
    kind = BY_CODE.get(code, TaskAttemptError)
    return TaskError(exception_class_path=class_path(kind),
                     traceback=f"{kind.__name__}: {code}: {error.get('message') or ''}\n")
