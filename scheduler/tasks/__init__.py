"""Django's task framework on this scheduler (TSK-1..6): `TASKS = {"default": {"BACKEND":
"scheduler.tasks.SchedulerBackend"}}`, then `@task` functions enqueue runs that execute in sandboxes."""

from scheduler.tasks.backend import SchedulerBackend

__all__ = ["SchedulerBackend"]
