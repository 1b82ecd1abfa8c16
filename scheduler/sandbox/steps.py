"""Durable steps for plays (RCP-1): `step("charge-card", charge, order_id)` runs once per run, not once per attempt.

Inside a callable play (any provider; the runner gives the play its run,
attempt, lease and token), a step claims the run's receipt for its key:

- completed by an earlier attempt: the stored output is returned and the function is not called;
- claimed: the function runs, and its result is stored (it must be JSON PostgreSQL can store) and returned
  as stored, so a first run and a retry see the same value; an exception fails the receipt and is raised;
- held by another live lease of this attempt: the step waits for it, claiming again;
- skipped: None; failed for good: StepFailed.

While the function runs, the receipt's lease is extended at the runner's own heartbeat cadence (a third of the
attempt's heartbeat timeout, the lease's length), so a step lives exactly as long as the runner is judged alive.
Keys are the play author's: the scheduler's own namespace (`sys:`) is refused. Standard library only.

Durable waits (WAIT-1) are steps too: `sleep("cool-off", seconds=3600)` and
`wait_for_event("approval", "approved", timeout=86400)`. A wait that is satisfied (its event came, its time passed)
returns at once, now and on every replay; one that is not ends the attempt (`Suspended`): the sandbox is released,
and the run resumes in a new sandbox when the event comes or the time passes, replaying the play with every
finished step's stored result.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from typing import Any, Callable

from scheduler.sandbox.protocol import RESERVED_KEY_PREFIX, Suspended
from scheduler.sandbox.runner import RunnerConfig, exchange
from scheduler.sandbox.storable import unstorable

HELD_POLL_SECONDS = 0.5
__all__ = ["step", "durable", "sleep", "wait_for_event", "TIMED_OUT", "Suspended", "StepError", "StepFailed",
           "StepFenced"]


class StepError(RuntimeError):
    """A step could not be run or recorded; the play should stop (the runner reports the attempt's failure)."""


class StepFailed(StepError):
    """The step's receipt failed for good (or in this attempt): there is nothing to run."""


class StepFenced(StepError):
    """This attempt is no longer the run's current one: its steps must not run."""


def _config() -> RunnerConfig:
    try:
        return RunnerConfig()
    except KeyError as missing:
        raise StepError(f"step() runs inside a play started by the scheduler's runner ({missing} is not set)") from None


def _post(config: RunnerConfig, path: str, body: dict, what: str) -> dict:
    """A step call on this attempt's behalf: its answer, or StepFenced (no longer current) / StepError (refused)."""
    identity = {"runId": config.run_id, "attempt": config.attempt, "leaseToken": config.lease_token}
    status, answer = exchange(config, path, {**identity, **body})
    if status == 409 and (answer or {}).get("error") == "attempt_not_current":
        raise StepFenced(f"attempt {config.attempt} is no longer current; {what} not run")
    if status is None or status >= 400:
        raise StepError(f"{what} refused ({status}): {(answer or {}).get('message', 'no answer')}")
    return answer


def _call(config: RunnerConfig, operation: str, body: dict) -> dict:
    return _post(config, f"/internal/runner/receipts/{operation}", body,
                 f"receipt {operation} for step {body.get('key')!r}")["receipt"]


def _lease_ms(config: RunnerConfig) -> int:
    return max(1_000, int(config.heartbeat_interval * 3000))


class _LeaseKeeper(threading.Thread):
    """Extends one receipt's lease at the runner's heartbeat cadence until the step returns."""

    def __init__(self, config: RunnerConfig, key: str, lease_id: str):
        super().__init__(daemon=True, name=f"step-lease-{key}")
        self.config, self.key, self.lease_id = config, key, lease_id
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.config.heartbeat_interval):
            try:
                answer = _call(self.config, "heartbeat", {"key": self.key, "leaseId": self.lease_id,
                                                          "leaseMs": _lease_ms(self.config)})
            except StepError:
                return  # fenced or refused: the completion will say so
            if answer["outcome"] != "extended":
                return


def _claim(config: RunnerConfig, key: str) -> dict:
    while True:
        receipt = _call(config, "claim", {"key": key, "leaseMs": _lease_ms(config)})
        if receipt["outcome"] != "held":
            return receipt
        time.sleep(HELD_POLL_SECONDS)


def _fail(config: RunnerConfig, key: str, lease_id: str, code: str, message: str) -> None:
    _call(config, "fail", {"key": key, "leaseId": lease_id, "error": {"code": code, "message": message[-2000:]}})


def _unstorable(result: Any) -> str | None:
    """Why `result` cannot be a receipt's output (the terminal output's rules), or None."""
    found = unstorable(result, "output")
    if found:
        return f"at {found[0]} {found[1]}"
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as error:
        return f"is not JSON ({error})"
    return None


def step(key: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run `function(*args, **kwargs)` once for this run under `key`; later attempts get its stored result."""
    if not isinstance(key, str) or not key or key.startswith(RESERVED_KEY_PREFIX):
        raise ValueError(f"a step key is a non-empty string outside the scheduler's {RESERVED_KEY_PREFIX!r} namespace")
    config = _config()
    receipt = _claim(config, key)
    if receipt["outcome"] == "completed":
        return receipt["output"]
    if receipt["outcome"] == "skipped":
        return None
    if receipt["outcome"] != "claimed":
        raise StepFailed(f"step {key!r} is {receipt['outcome']}: {json.dumps(receipt.get('error'))}")
    lease_id = receipt["leaseId"]
    keeper = _LeaseKeeper(config, key, lease_id)
    keeper.start()
    try:
        result = function(*args, **kwargs)
    except Exception as error:
        keeper.done.set()
        _fail(config, key, lease_id, "step_failed", f"{type(error).__name__}: {error}")
        raise
    finally:
        keeper.done.set()
    problem = _unstorable(result)
    if problem:
        _fail(config, key, lease_id, "unstorable_output", f"the step's result {problem}")
        raise StepError(f"step {key!r} returned a value PostgreSQL cannot store: {problem}")
    stored = _call(config, "complete", {"key": key, "leaseId": lease_id, "output": result, "returnOutput": True})
    if stored["outcome"] != "completed":
        raise StepError(f"step {key!r} ran but its lease was lost before it was recorded ({stored['outcome']})")
    return stored["output"]


def durable(key: str) -> Callable:
    """`@durable("send-welcome")`: the decorated function is a step under `key` (one result per run)."""
    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return step(key, function, *args, **kwargs)
        return wrapper
    return decorate


class _TimedOut:
    """What wait_for_event returns when its timeout passed first: falsy, and unlike any payload (None included)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "TIMED_OUT"


TIMED_OUT = _TimedOut()


def _check_key(key: str) -> None:
    if not isinstance(key, str) or not key or key.startswith(RESERVED_KEY_PREFIX):
        raise ValueError(f"a wait key is a non-empty string outside the scheduler's {RESERVED_KEY_PREFIX!r} namespace")


def _seconds_ms(seconds: Any, name: str) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise ValueError(f"{name} is a number of seconds, 0 or more")
    return int(seconds * 1000)


def _begin(key: str, body: dict) -> Any:
    """The wait's stored result when it is satisfied; raises Suspended when it is not (the attempt then ends)."""
    answer = _post(_config(), "/internal/runner/waits/begin", {"key": key, **body}, f"wait {key!r}")
    if answer["outcome"] == "completed":
        return answer["output"]
    raise Suspended(key)


def sleep(key: str, seconds: float | None = None, until: Any = None) -> None:
    """Wait `seconds` (from the first time this key is reached) or `until` (a timezone-aware datetime or epoch
    seconds), durably: the sandbox is released meanwhile. Replays return at once once the time has passed."""
    _check_key(key)
    if (seconds is None) == (until is None):
        raise ValueError("sleep() takes seconds or until, one of them")
    if seconds is not None:
        _begin(key, {"kind": "timer", "delayMs": _seconds_ms(seconds, "seconds")})
        return None
    epoch = until.timestamp() if hasattr(until, "timestamp") else until
    if getattr(until, "tzinfo", "aware") is None:
        raise ValueError("until must be timezone-aware (a naive datetime names no instant)")
    _begin(key, {"kind": "timer", "untilMs": int(_seconds_ms(epoch, "until"))})
    return None


def wait_for_event(key: str, name: str, timeout: float | None = None) -> Any:
    """The payload of the next event `name` sent to this run (POST /internal/runs/{id}/events, send_event), or
    TIMED_OUT when `timeout` seconds passed first (from the first time this key is reached). Each event satisfies
    one wait; one sent before the wait is kept for it."""
    _check_key(key)
    if not isinstance(name, str) or not name:
        raise ValueError("an event name is a non-empty string")
    body = {"kind": "event", "event": name}
    if timeout is not None:
        body["delayMs"] = _seconds_ms(timeout, "timeout")
    output = _begin(key, body)
    if output.get("timedOut"):
        return TIMED_OUT
    return output["event"]["payload"]
