"""The detached runner: what a sandbox executes (`python -m scheduler.sandbox.runner`).

It runs one play (a `module:function` callable or a command) in a child
process, heartbeats to the scheduler (RUN-4) at a third of its heartbeat
timeout, stops the play when a cancel is queued or its attempt is no longer
current, and posts exactly one terminal with stats.runtimeResources measured
from the play's process. Transient HTTP failures are retried with backoff.
Standard library only, like all of scheduler/sandbox/: sandbox images need
nothing else. A play that cannot start, or whose
output PostgreSQL could not store, is reported at once as a failed result
(`play_start_failed`, `unstorable_output`) with the tail of the runner's log,
never left to be judged lost and run again.

Environment: SCHEDULER_API_URL, SCHEDULER_RUNNER_TOKEN, SCHEDULER_RUN_ID,
SCHEDULER_ATTEMPT, SCHEDULER_LEASE_TOKEN, SCHEDULER_PLAY (JSON: {"callable":
"pkg.mod:fn"}, {"task": "pkg.mod:fn", "settingsModule": ...} (task_call.py) or {"command": [...]}),
SCHEDULER_PLAY_INPUT (JSON),
SCHEDULER_HEARTBEAT_TIMEOUT_MS.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request

from scheduler.sandbox.protocol import PLAY_START_FAILED, UNSTORABLE_OUTPUT, Suspended
from scheduler.sandbox.storable import unstorable

TRANSIENT_STATUSES = {429, 500, 502, 503, 504}
MESSAGE_LIMIT = 2000
TRACEBACK_LINES = 12
LOG_TAIL_BYTES = 8 * 1024


class RunnerConfig:
    def __init__(self, env=os.environ):
        self.api_url = env["SCHEDULER_API_URL"].rstrip("/")
        self.token = env["SCHEDULER_RUNNER_TOKEN"]
        self.run_id = env["SCHEDULER_RUN_ID"]
        self.attempt = int(env["SCHEDULER_ATTEMPT"])
        self.lease_token = env["SCHEDULER_LEASE_TOKEN"]
        self.play = json.loads(env.get("SCHEDULER_PLAY") or "{}")
        self.play_input = json.loads(env.get("SCHEDULER_PLAY_INPUT") or "null")
        timeout_ms = int(env.get("SCHEDULER_HEARTBEAT_TIMEOUT_MS") or 60_000)
        self.heartbeat_interval = max(0.05, timeout_ms / 3000)


def exchange(config: RunnerConfig, path: str, body: dict, *, attempts: int = 8) -> tuple[int | None, dict | None]:
    """POST with retries on transient failures: (status, JSON answer); (None, None) when the scheduler never answered.

    A refusal (4xx) is answered at once with its status and JSON error, never retried.
    """
    data = json.dumps(body, allow_nan=False).encode()
    delay = 0.2
    for attempt in range(attempts):
        request = urllib.request.Request(f"{config.api_url}{path}", data=data, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {config.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            with error:  # the refused response's connection, not left to the garbage collector
                if error.code not in TRANSIENT_STATUSES:
                    try:
                        return error.code, json.loads(error.read() or b"{}")
                    except ValueError:
                        return error.code, {}
        except (urllib.error.URLError, TimeoutError, OSError):
            pass
        if attempt < attempts - 1:
            time.sleep(delay + random.uniform(0, delay))
            delay = min(delay * 2, 5.0)
    print(f"runner: {path} failed after {attempts} tries", file=sys.stderr)
    return None, None


def post(config: RunnerConfig, path: str, body: dict, *, attempts: int = 8) -> dict | None:
    """POST with retries on transient failures; None when the scheduler refused for good or never answered."""
    status, answer = exchange(config, path, body, attempts=attempts)
    if status is not None and status >= 400:
        print(f"runner: {path} refused with {status}", file=sys.stderr)
        return None
    return answer


def _identity(config: RunnerConfig) -> dict:
    return {"runId": config.run_id, "attempt": config.attempt, "leaseToken": config.lease_token}


def start_play(config: RunnerConfig, output_path: str) -> subprocess.Popen:
    if "command" in config.play:
        return subprocess.Popen(config.play["command"], stdin=subprocess.DEVNULL)
    mode = "--task" if "task" in config.play else "--call"
    callable_path = config.play.get("task" if mode == "--task" else "callable")
    if not callable_path or ":" not in callable_path:
        raise ValueError("SCHEDULER_PLAY needs {\"callable\": \"module:function\"}, {\"task\": ...} or {\"command\": [...]}")
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.sandbox.runner", mode, callable_path, output_path],
        stdin=subprocess.DEVNULL, env={**os.environ, "SCHEDULER_PLAY_INPUT": json.dumps(config.play_input)},
    )


def _failure(code: str, message: str) -> dict:
    return {"ok": False, "error": {"code": code, "message": message[-MESSAGE_LIMIT:]}}


def _traceback_tail() -> str:
    return "".join(traceback.format_exc().splitlines(keepends=True)[-TRACEBACK_LINES:])


def call_play(callable_path: str, output_path: str) -> int:
    """Child side: import and call the play, write its JSON output (or why there is none).

    The output file is opened before the play runs: a play that changes directory still writes where the runner
    reads.
    """
    with open(output_path, "w") as output:
        return _call_play(callable_path, output)


def _call_play(callable_path: str, output) -> int:
    module_name, _, function_name = callable_path.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except Exception:  # noqa: BLE001 - an import error or a missing callable is the attempt's result, said at once
        message = f"cannot load {callable_path}:\n{_traceback_tail()}"
        print(f"runner: {message}", file=sys.stderr, flush=True)  # into runner.log too
        return _write(output, _failure(PLAY_START_FAILED, message))
    try:
        result = function(json.loads(os.environ.get("SCHEDULER_PLAY_INPUT") or "null"))
    except Suspended as suspended:  # WAIT-2: a wait not yet satisfied ends the attempt, not the run
        return _write(output, {"ok": False, "suspended": {"key": suspended.key}})
    except Exception as exc:  # noqa: BLE001 - the play's failure is its result
        return _write(output, _failure("play_failed", f"{type(exc).__name__}: {exc}"))
    found = unstorable(result, "output")
    if found:
        # Posted as is, the result would be refused on every try and then judged lost, and the play run again.
        return _write(output, _failure(UNSTORABLE_OUTPUT, f"the play's {found[0]} {found[1]}"))
    return _write(output, {"ok": True, "output": result})


def _write(output, payload: dict) -> int:
    try:
        text = json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as error:
        text = json.dumps(_failure(UNSTORABLE_OUTPUT, f"the play's output is not JSON: {error}"))
        payload = {"ok": False}
    output.write(text)
    return 0 if payload["ok"] else 1


def measured_stats(started: float) -> dict:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"runtimeResources": {
        "cpuMs": int((usage.ru_utime + usage.ru_stime) * 1000),
        "wallMs": int((time.monotonic() - started) * 1000),
        "peakMemoryBytes": int(usage.ru_maxrss) * 1024,
    }}


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(config: RunnerConfig) -> int:
    started = time.monotonic()
    # Relative to the working directory, which a sandbox provider may rename while the play runs (the local one
    # names its folder after the runner's pid once it started): an absolute path read at start-up would vanish.
    output_path = f"play-output-{config.attempt}.json"
    try:
        play = start_play(config, output_path)
    except (ValueError, OSError) as error:
        # A play that cannot start is said within seconds, never left to the sweep as a lost runner.
        result = {"status": "failed", "error": {"code": PLAY_START_FAILED, "message": str(error)[-MESSAGE_LIMIT:]},
                  "stats": measured_stats(started)}
        return _post_terminal(config, result)
    signal.signal(signal.SIGTERM, lambda *_: (stop(play), sys.exit(143)))
    while True:
        try:
            play.wait(timeout=config.heartbeat_interval)
            break
        except subprocess.TimeoutExpired:
            pass
        answer = post(config, "/internal/runner/heartbeat", _identity(config), attempts=3)
        if answer is None:
            continue
        if not answer.get("current", False):
            stop(play)  # superseded or settled elsewhere: post nothing
            return 0
        if answer.get("cancelRequested"):
            stop(play)
            result = {"status": "failed", "error": {"code": "cancelled", "message": "cancel requested"},
                      "stats": measured_stats(started)}
            post(config, "/internal/runner/terminal", {**_identity(config), "result": result})
            return 0
    result = _result(play.returncode, output_path)
    result["stats"] = measured_stats(started)
    return _post_terminal(config, result)


def _post_terminal(config: RunnerConfig, result: dict) -> int:
    """Post the one terminal; a failure carries the tail of the runner's log, which cleanup later deletes."""
    if result["status"] == "failed":
        tail = log_tail()
        if tail:
            result["logTail"] = tail
    answer = post(config, "/internal/runner/terminal", {**_identity(config), "result": result})
    return 0 if answer is not None else 1


def log_tail(path: str | None = None) -> str | None:
    """The last LOG_TAIL_BYTES of the runner's log (SCHEDULER_RUNNER_LOG, else runner.log here), storable text."""
    path = path or os.environ.get("SCHEDULER_RUNNER_LOG") or "runner.log"
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return text.replace("\x00", "") or None


def _result(returncode: int, output_path: str) -> dict:
    try:
        with open(output_path) as handle:
            payload = json.load(handle)
        os.unlink(output_path)
    except (OSError, ValueError):
        payload = None
    if payload is None:
        if returncode == 0:
            return {"status": "completed", "output": {"exitCode": 0}}
        return {"status": "failed", "error": {"code": "play_failed", "message": f"play exited with {returncode}"}}
    if payload["ok"]:
        return {"status": "completed", "output": payload["output"]}
    if "suspended" in payload:
        return {"status": "suspended", "wait": payload["suspended"]}
    return {"status": "failed", "error": payload["error"]}


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--call":
        return call_play(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "--task":
        from scheduler.sandbox.task_call import call_task  # Django is imported for tasks only

        return call_task(argv[2], argv[3])
    return run(RunnerConfig())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
