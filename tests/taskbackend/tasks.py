"""Tasks the task-backend tests enqueue. The first group mirrors the task module of Django's own tests
(django/django, tests/tasks/tasks.py), so the conformance cases exercise the same functions; the rest are this
project's own (retries, priority, files the tests read)."""

import asyncio
import json
import os
import time
from pathlib import Path

from django.dispatch import receiver
from django.tasks import TaskContext, task
from django.tasks.signals import task_finished, task_started


@task()
def noop_task(*args, **kwargs):
    return None


@task
def noop_task_from_bare_decorator(*args, **kwargs):
    return None


@task()
async def noop_task_async(*args, **kwargs):
    return None


@task()
def calculate_meaning_of_life():
    return 42


@task()
def failing_task_value_error():
    raise ValueError("This Task failed due to ValueError")


@task()
def failing_task_system_exit():
    raise SystemExit("This Task failed due to SystemExit")


@task()
def complex_exception():
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value():
    return {"when": time}  # a module: what Django's own backends refuse to keep as a return value


@task(takes_context=True)
def get_task_id(context):
    return context.task_result.id


@task(takes_context=True)
def check_context(context, attempt):
    assert isinstance(context, TaskContext)
    assert context.attempt == attempt


# This project's own.

@task()
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task()
async def add_later(a, b):
    await asyncio.sleep(0)
    return a + b


@task(takes_context=True)
def attempt_and_pid(context, hold_file):
    """Says which attempt runs it; attempt 1 writes its pid to `hold_file` and waits there to be killed."""
    if context.attempt == 1:
        Path(hold_file).write_text(str(os.getpgid(0)))
        time.sleep(600)
    return {"attempt": context.attempt, "workers": context.task_result.worker_ids}


@task()
def record_order(log_file, name):
    with open(log_file, "a") as log:
        log.write(f"{name}\n")
    return name


@task()
def fail_after_signals(signals_file):
    raise ValueError("failed on purpose")


@receiver(task_started)
def _write_started(sender, task_result, **kwargs):
    """In the sandbox: what task_started said, to the file the task's kwargs name (APP-7)."""
    if task_result.kwargs.get("signals_file"):
        with open(task_result.kwargs["signals_file"], "a") as seen:
            seen.write(json.dumps(["started", sender.__name__, task_result.id, task_result.status]) + "\n")


@receiver(task_finished)
def _write_finished(sender, task_result, **kwargs):
    if task_result.kwargs.get("signals_file"):
        said = task_result.return_value if task_result.status == "SUCCESSFUL" else \
            [error.exception_class_path for error in task_result.errors]
        with open(task_result.kwargs["signals_file"], "a") as seen:
            seen.write(json.dumps(["finished", sender.__name__, task_result.id, task_result.status, said]) + "\n")


def _log_step(log_file, name):
    with open(log_file, "a") as log:
        log.write(f"{name}\n")
    return name


@task(takes_context=True)
def steps_then_killed(context, log_file, hold_file):
    """TSK-5: two durable steps; attempt 1 stops after the first, writes its process group and waits to be killed."""
    from scheduler.sandbox.steps import step

    first = step("one", _log_step, log_file, "one")
    if context.attempt == 1:
        Path(hold_file).write_text(str(os.getpgid(0)))
        time.sleep(600)
    second = step("two", _log_step, log_file, "two")
    return {"attempt": context.attempt, "steps": [first, second]}
