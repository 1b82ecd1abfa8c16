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
