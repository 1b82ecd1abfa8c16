"""Run the scheduler's loops together, supervised (APP-5).

`manage.py scheduler_workers` starts each worker loop as a child process
with the launching project's settings; this repository's `scheduler_up`
adds its web server and embedded database around the same children.
SIGTERM or SIGINT stops the children, then the supervisor returns.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scheduler.conf import project_import_root

logger = logging.getLogger(__name__)


# A child that exits this many times in a row (each within STEADY_SECONDS of its start) is given up on.
MAX_FAILURES_IN_A_ROW = 5
STEADY_SECONDS = 30.0
RESTART_BACKOFF_BASE_S = 1.0
RESTART_BACKOFF_CAP_S = 30.0


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float = 0.0


class AlreadyRunning(Exception):
    """Another scheduler_up holds this data directory."""


@contextlib.contextmanager
def single_instance(directory: Path, name: str = "scheduler_up.lock"):
    """Hold an exclusive lock on `directory`/`name` for as long as the block runs; refuse at once when another holds it.

    Two stacks on one database would run two sets of workers against it and
    fight over its connections.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise AlreadyRunning(f"scheduler_up is already running on {directory} (pid {holder}); stop it first") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()


def stop_local_sandboxes(write) -> None:
    """End the runners of local sandboxes still running (their runs are judged runner_lost and retried next time)."""
    from scheduler.conf import scheduler_settings
    from scheduler.providers.local import LocalProvider

    provider = LocalProvider(scheduler_settings.sandbox_dir)
    running = provider.live_sandboxes()
    if running:
        provider.stop(running)
        write(f"stopped {len(running)} local sandbox runner(s): {', '.join(running)}")


def child_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every loop is started with: this project's settings, importable from any working directory."""
    from django.conf import settings

    env = dict(os.environ if base is None else base)
    env["DJANGO_SETTINGS_MODULE"] = settings.SETTINGS_MODULE
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project_import_root(), env.get("PYTHONPATH")]))
    return env


def command(*args: str) -> list[str]:
    """A loop as a child process: `python -m scheduler <command>` (manage.py's one-line errors, no manage.py)."""
    return [sys.executable, "-m", "scheduler", *args]


def worker_children() -> list[Child]:
    """Every loop of a deployment (APP-5), one child each; the web server is the project's own."""
    return [
        Child("dispatch", command("dispatch_runs", "--interval", "0.5")),
        Child("liveness", command("run_liveness_sweep", "--interval", "2")),
        Child("drain", command("drain_outbox", "--workers", "2", "--interval", "1")),
        Child("cleanup", command("run_sandbox_cleanup", "--interval", "1")),
        Child("billing", command("finalize_billing", "--interval", "2")),
        Child("schedules", command("run_schedules")),
        Child("wait-timers", command("run_wait_timers")),
        Child("prune", command("prune_history")),
    ]


class Supervisor:
    """Starts the children, restarts one that exits (with backoff), and stops them all on SIGTERM/SIGINT.

    A process manager's contract: the web server keeps serving while a worker
    restarts; only a child that keeps failing (MAX_FAILURES_IN_A_ROW exits,
    each soon after its start) stops everything, with a non-zero exit code
    naming it.
    """

    def __init__(self, children: list[Child], env: dict[str, str], stop_timeout: float = 15.0,
                 restart_backoff_s: float = RESTART_BACKOFF_BASE_S):
        self.children = children
        self.env = env
        self.stop_timeout = stop_timeout
        self.restart_backoff_s = restart_backoff_s
        self.stopping = False
        self.gave_up: str | None = None
        self.on_tick = None

    def _on_signal(self, signum, frame):
        self.stopping = True

    def run(self, on_started=None) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            for child in self.children:
                self._start(child)
            if on_started is not None:
                self._call(on_started, "start hook")
            while not self.stopping:
                for child in self.children:
                    self._watch(child)
                time.sleep(0.2)
                if self.on_tick is not None:
                    self._call(lambda _: self.on_tick(), "progress check")
        finally:
            self._stop_all()
        return 1 if self.gave_up else 0

    def _start(self, child: Child) -> None:
        child.process = subprocess.Popen(child.argv, env=self.env)
        child.started_at = time.monotonic()
        logger.info("started %s (pid %s)", child.name, child.process.pid)

    def _watch(self, child: Child) -> None:
        """Restart a child that exited, after its backoff; give up on one that keeps failing."""
        if child.process is None:
            if time.monotonic() >= child.restart_at and not self.stopping:
                self._start(child)
            return
        code = child.process.poll()
        if code is None:
            return
        child.process = None
        ran_for = time.monotonic() - child.started_at
        child.failures = 1 if ran_for >= STEADY_SECONDS else child.failures + 1
        if child.failures >= MAX_FAILURES_IN_A_ROW:
            logger.error("%s exited with %s %d times in a row; stopping everything", child.name, code, child.failures)
            self.gave_up = child.name
            self.stopping = True
            return
        delay = min(RESTART_BACKOFF_CAP_S, self.restart_backoff_s * 2 ** (child.failures - 1))
        child.restart_at = time.monotonic() + delay
        logger.warning("%s exited with %s after %.0f s; restarting it in %.0f s", child.name, code, ran_for, delay)

    def _call(self, hook, what: str) -> None:
        try:
            hook(self)
        except Exception as error:  # noqa: BLE001 - the demo is a nicety; a database blip must not stop the stack
            logger.warning("%s failed: %s", what, type(error).__name__)

    def _stop_all(self) -> None:
        for child in self.children:
            if child.process and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop in time; killing it", child.name)
                child.process.kill()
                child.process.wait()
