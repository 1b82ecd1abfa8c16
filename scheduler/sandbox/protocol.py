"""The names the sandbox side and the scheduler both use: written here once, imported by both.

The runner writes these error codes into a failed result (kinds.FailureCode
lists them among the scheduler's own), and the step API refuses keys in the
scheduler's receipt namespace before any request (RCP-2).
"""

PLAY_START_FAILED = "play_start_failed"  # the play could not be loaded or started
UNSTORABLE_OUTPUT = "unstorable_output"  # the play's output holds what PostgreSQL cannot store
RESERVED_KEY_PREFIX = "sys:"  # RCP-2: the scheduler's own receipt namespace
# TSK-5: set inside a task's sandbox before Django's settings are read, so settings can skip what needs the
# scheduler's database or secrets (a sandbox has neither).
TASK_SANDBOX_VARIABLE = "SCHEDULER_TASK_SANDBOX"


def worker_id(run_id: str, attempt: int) -> str:
    """TSK-3: the id of the worker that ran one attempt of a task, the same inside the sandbox and in get_result."""
    return f"{run_id}/{attempt}"


class Suspended(BaseException):
    """WAIT-2: raised by a durable wait that is not yet satisfied; the runner ends the attempt with a `suspended`
    result naming the wait. A BaseException, so a play's own `except Exception` does not swallow it."""

    def __init__(self, key: str):
        super().__init__(f"waiting on {key!r}: the attempt ends suspended and the run resumes in a new sandbox")
        self.key = key
