"""The detached runner: what a sandbox executes (`python -m scheduler.runner`).

It runs one play (a `module:function` callable or a command) in a child
process, heartbeats to the scheduler (RUN-4) at a third of its heartbeat
timeout, stops the play when a cancel is queued or its attempt is no longer
current, and posts exactly one terminal with stats.runtimeResources measured
from the play's process. Transient HTTP failures are retried with backoff.
Standard library only: sandbox images need nothing else.

Environment: SCHEDULER_API_URL, SCHEDULER_RUNNER_TOKEN, SCHEDULER_RUN_ID,
SCHEDULER_ATTEMPT, SCHEDULER_LEASE_TOKEN, SCHEDULER_PLAY (JSON: {"callable":
"pkg.mod:fn"} or {"command": [...]}), SCHEDULER_PLAY_INPUT (JSON),
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
import urllib.error
import urllib.request

TRANSIENT_STATUSES = {429, 500, 502, 503, 504}


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


def post(config: RunnerConfig, path: str, body: dict, *, attempts: int = 8) -> dict | None:
    """POST with retries on transient failures; None when the scheduler refused for good."""
    data = json.dumps(body).encode()
    delay = 0.2
    for attempt in range(attempts):
        request = urllib.request.Request(f"{config.api_url}{path}", data=data, method="POST")
        request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {config.token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            error.close()  # the refused response's connection, not left to the garbage collector
            if error.code not in TRANSIENT_STATUSES:
                print(f"runner: {path} refused with {error.code}", file=sys.stderr)
                return None
        except (urllib.error.URLError, TimeoutError, OSError):
            pass
        if attempt < attempts - 1:
            time.sleep(delay + random.uniform(0, delay))
            delay = min(delay * 2, 5.0)
    print(f"runner: {path} failed after {attempts} tries", file=sys.stderr)
    return None


def _identity(config: RunnerConfig) -> dict:
    return {"runId": config.run_id, "attempt": config.attempt, "leaseToken": config.lease_token}


def start_play(config: RunnerConfig, output_path: str) -> subprocess.Popen:
    if "command" in config.play:
        return subprocess.Popen(config.play["command"], stdin=subprocess.DEVNULL)
    callable_path = config.play.get("callable")
    if not callable_path or ":" not in callable_path:
        raise ValueError("SCHEDULER_PLAY needs {\"callable\": \"module:function\"} or {\"command\": [...]}")
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.runner", "--call", callable_path, output_path],
        stdin=subprocess.DEVNULL, env={**os.environ, "SCHEDULER_PLAY_INPUT": json.dumps(config.play_input)},
    )


def call_play(callable_path: str, output_path: str) -> int:
    """Child side: import and call the play, write its JSON output."""
    module_name, _, function_name = callable_path.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    try:
        output = function(json.loads(os.environ.get("SCHEDULER_PLAY_INPUT") or "null"))
        payload = {"ok": True, "output": output}
    except Exception as exc:  # noqa: BLE001 - the play's failure is its result
        payload = {"ok": False, "error": {"code": "play_failed", "message": f"{type(exc).__name__}: {exc}"[:2000]}}
    with open(output_path, "w") as handle:
        json.dump(payload, handle)
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
    output_path = os.path.join(os.getcwd(), f"play-output-{config.attempt}.json")
    play = start_play(config, output_path)
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
    answer = post(config, "/internal/runner/terminal", {**_identity(config), "result": result})
    return 0 if answer is not None else 1


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
    return {"status": "failed", "error": payload["error"]}


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--call":
        return call_play(argv[2], argv[3])
    return run(RunnerConfig())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
