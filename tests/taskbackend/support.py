"""Running enqueued tasks to their end in local sandboxes, as the dispatcher and the sweep would."""

from __future__ import annotations

from scheduler.providers.local import reap_children
from scheduler.runs import dispatch
from tests.support import wait_for

# The backend the task tests configure: local sandboxes, a short heartbeat timeout so a killed runner is judged
# lost within seconds of the sweep looking.
TEST_TASKS = {"default": {"BACKEND": "scheduler.tasks.SchedulerBackend", "QUEUES": [],
                          "OPTIONS": {"org": "org-tasks", "provider": "local", "heartbeat_timeout_ms": 1000}}}


def finish(*results, seconds: float = 90):
    """Dispatch until every result is finished, refreshing each (what a caller polling get_result sees)."""

    def done() -> bool:
        reap_children()
        dispatch.run_once(10)
        for result in results:
            result.refresh()
        return all(result.is_finished for result in results)

    wait_for(done, "the tasks finishing", seconds=seconds)
    return results[0] if len(results) == 1 else results


def sandbox_log_records(result, logger: str = "django.tasks") -> list[str]:
    """The records `logger` wrote in the sandboxes that ran `result` (each with its traceback lines), in order.

    Where Django's immediate backend logs in the enqueuing process, this backend's task_started and task_finished
    are sent in the sandbox (APP-7); the runner's log (config/settings.py's LOGGING there) is where their lines
    are. A record starts with its timestamp; the lines after it, up to the next, are its traceback.
    """
    import re
    from pathlib import Path

    from scheduler.conf import scheduler_settings
    from tests.factories import query

    records: list[str] = []
    for (sandbox_id,) in query("SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s ORDER BY created_at",
                               [result.id]):
        text = (Path(scheduler_settings.sandbox_dir) / sandbox_id / "runner.log").read_text(errors="replace")
        for record in re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", text):
            if f" {logger} " in record.split("\n", 1)[0]:
                records.append(record)
    return records
