"""What a task's failed attempt reports when the task itself raised nothing (TSK-3).

TaskError names an exception class; an attempt the scheduler ended (its runner vanished, it was cancelled, it
could not start) gets one of these, so `error.exception_class` resolves in any process.
"""

from scheduler.kinds import FailureCode


class TaskAttemptError(Exception):
    """An attempt of a task ended without the task's own exception; the message carries the scheduler's code."""


class TaskRunnerLost(TaskAttemptError):
    """The attempt's runner stopped heartbeating (or its sandbox never started); the run is retried while attempts
    remain."""


class TaskCancelled(TaskAttemptError):
    """A cancel was requested for the run."""


class TaskCouldNotStart(TaskAttemptError):
    """The task's module, settings or launch could not be loaded in its sandbox."""


class TaskReturnValueUnstorable(TaskAttemptError):
    """The task returned what PostgreSQL cannot store (NaN, U+0000, a lone surrogate)."""


class TaskWaitDeadlineExceeded(TaskAttemptError):
    """The run's wait deadline passed."""


BY_CODE: dict[str, type[TaskAttemptError]] = {
    FailureCode.RUNNER_LOST: TaskRunnerLost,
    FailureCode.DISPATCH_LOST: TaskRunnerLost,
    FailureCode.CANCELLED: TaskCancelled,
    FailureCode.PLAY_START_FAILED: TaskCouldNotStart,
    FailureCode.INVALID_LAUNCH: TaskCouldNotStart,
    FailureCode.UNSTORABLE_OUTPUT: TaskReturnValueUnstorable,
    FailureCode.WAIT_DEADLINE_EXCEEDED: TaskWaitDeadlineExceeded,
}


def class_path(kind: type[BaseException]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"
