"""Run the scheduler's processes together: the one-command newcomer set-up.

`manage.py scheduler_up` migrates, then starts gunicorn and each worker loop
as child processes that share one DATABASE_URL (the embedded server's when
DATABASE_URL is unset). SIGTERM or SIGINT stops the children, then the
process exits so the embedded server is stopped too.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scheduler.conf import PROJECT_DIR

logger = logging.getLogger(__name__)


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None


def child_database_url() -> str:
    from scheduler.conf import scheduler_settings

    if scheduler_settings.embedded_database:
        from config.embedded_pg import database_url

        return database_url()
    return os.environ["DATABASE_URL"]


def local_internal_token() -> tuple[str, Path]:
    """A control-API token for a local set-up without SCHEDULER_INTERNAL_TOKEN.

    Kept in a 0600 file beside the embedded server, never printed or logged.
    """
    import secrets

    path = PROJECT_DIR / ".embedded" / "internal_token"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
    return path.read_text().strip(), path


def manage(*args: str) -> list[str]:
    return [sys.executable, str(PROJECT_DIR / "manage.py"), *args]


def default_children(bind: str) -> list[Child]:
    return [
        Child("web", [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_DIR / "config" / "gunicorn.conf.py"), "--bind", bind]),
        Child("dispatch", manage("dispatch_runs", "--interval", "0.5")),
        Child("liveness", manage("run_liveness_sweep", "--interval", "2")),
        Child("drain", manage("drain_outbox", "--workers", "2", "--interval", "1")),
        Child("cleanup", manage("run_sandbox_cleanup", "--interval", "1")),
        Child("billing", manage("finalize_billing", "--interval", "2")),
    ]


class Supervisor:
    def __init__(self, children: list[Child], env: dict[str, str], stop_timeout: float = 15.0):
        self.children = children
        self.env = env
        self.stop_timeout = stop_timeout
        self.stopping = False
        self.on_tick = None

    def _on_signal(self, signum, frame):
        self.stopping = True

    def run(self, on_started=None) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for child in self.children:
            child.process = subprocess.Popen(child.argv, env=self.env, cwd=PROJECT_DIR)
            logger.info("started %s (pid %s)", child.name, child.process.pid)
        if on_started is not None:
            on_started(self)
        exit_code = 0
        while not self.stopping:
            for child in self.children:
                code = child.process.poll()
                if code is not None:
                    logger.error("%s exited with %s; stopping everything", child.name, code)
                    self.stopping = True
                    exit_code = 1
            time.sleep(0.2)
            if self.on_tick is not None:
                self.on_tick()
        self._stop_all()
        return exit_code

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
