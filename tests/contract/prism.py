"""Stoplight Prism (npm, Apache-2.0) as a validating proxy: every request is checked against an OpenAPI document
before it reaches the upstream, and every answer on its way back (`--errors`: a violation is an error response,
422 for a request, 500 for an answer, never a warning in a log).

Installed by .ci/run with `npm ci` from tests/contract/package-lock.json; without it the contract tests skip
with one line saying how to install it.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parent / "node_modules" / ".bin" / "prism"
STARTUP_SECONDS = 60


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def require() -> None:
    if not BIN.exists() or shutil.which("node") is None:
        pytest.skip("Prism is not installed: run `npm ci --prefix tests/contract` (.ci/run does)")


class Prism:
    """One `prism proxy` process in front of `upstream`; `log()` is what it said (its violations among it)."""

    def __init__(self, document: Path, upstream: str, log_path: Path):
        self.port = _free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [str(BIN), "proxy", str(document), upstream, "--errors", "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_listening()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prism exited with {self.process.returncode}: {self.log()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.2)
        raise RuntimeError(f"prism did not listen within {STARTUP_SECONDS} s: {self.log()[-2000:]}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def violations(self) -> list[str]:
        """Each request Prism ended with an error (a 422 for a request, a 500 for an answer); its warnings (an
        undocumented 404, say) are not refusals."""
        return [line for line in self.log().splitlines() if "\u2716" in line]  # its error mark, before each line

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
