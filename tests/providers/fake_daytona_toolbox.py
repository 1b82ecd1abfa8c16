"""The fake Daytona's toolbox: file upload, sessions and commands in a session, as the toolbox document names them.

With `run_commands`, a session's command really runs: `sh -c` in an empty directory of the sandbox's own, with
the sandbox's `env` and a PATH whose `python3` is the base interpreter (not this project's virtualenv), so it
cannot import the scheduler unless the start carried the runner in, as on a stock image. Uploads land at the
path they name, which must be under /tmp (the only place a fake may write as a sandbox would).
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path


def base_python() -> str:
    """The interpreter under this virtualenv: the standard library, and none of this project's packages."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _multipart_file(raw: bytes, content_type: str) -> bytes | None:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_payload(decode=True)
    return None


class Toolbox:
    def __init__(self, run_commands: bool):
        self.run_commands = run_commands
        self.sessions: dict[str, set[str]] = {}
        self.commands: dict[str, list[str]] = {}  # sandbox id -> commands executed
        self.processes: dict[str, list[subprocess.Popen]] = {}
        self.uploads: dict[str, list[str]] = {}
        self._root = Path(tempfile.mkdtemp(prefix="fake-daytona-"))
        self._bin = self._root / "bin"
        self._bin.mkdir()
        (self._bin / "python3").symlink_to(base_python())
        self._lock = threading.Lock()

    @property
    def python(self) -> str:
        """The `python3` a sandbox's PATH finds first."""
        return str(self._bin / "python3")

    def workdir(self, sandbox_id: str) -> Path:
        return self._root / "sandboxes" / sandbox_id

    def handle(self, method, sandbox, path, query, payload, raw, headers):
        sandbox_id = sandbox["id"]
        if method == "POST" and path == "/files/upload":
            return self._upload(sandbox_id, query, raw, headers.get("Content-Type") or "")
        if method == "POST" and path == "/process/session":
            if not isinstance(payload, dict) or not isinstance(payload.get("sessionId"), str):
                return 400, {"message": "sessionId is required"}
            with self._lock:
                sessions = self.sessions.setdefault(sandbox_id, set())
                if payload["sessionId"] in sessions:
                    return 409, {"message": "session already exists"}
                sessions.add(payload["sessionId"])
            return 201, None
        parts = path.strip("/").split("/")
        if method == "POST" and len(parts) == 4 and parts[:2] == ["process", "session"] and parts[3] == "exec":
            if parts[2] not in self.sessions.get(sandbox_id, set()):
                return 404, {"message": "session not found"}
            if not isinstance(payload, dict) or not isinstance(payload.get("command"), str):
                return 400, {"message": "command is required"}
            self.commands.setdefault(sandbox_id, []).append(payload["command"])
            if self.run_commands:
                self._run(sandbox, payload["command"])
            return 202, {"cmdId": f"cmd-{len(self.commands[sandbox_id])}"}
        return 404, {"message": "no route"}

    def _upload(self, sandbox_id, query, raw, content_type):
        target = (query.get("path") or [""])[0]
        if not target.startswith("/tmp/") or ".." in target or not content_type.startswith("multipart/form-data"):
            return 400, {"message": "a file and a path under /tmp are required"}
        self.uploads.setdefault(sandbox_id, []).append(target)
        if not self.run_commands:
            return 200, {}  # nothing will read it: the benchmarks' fake does not parse or write 30 KB a start
        data = _multipart_file(raw, content_type)
        if data is None:
            return 400, {"message": "the form has no file"}
        staging = f"{target}.{os.getpid()}.{threading.get_ident()}"
        Path(staging).write_bytes(data)
        os.replace(staging, target)  # the same content-addressed file from many starts at once
        # The document promises an object (gin.H); the daemon answers c.Status(200) with no body
        # (apps/daemon/pkg/toolbox/fs/upload_file.go). The fake keeps to the document; a test holds the client to both.
        return 200, {}

    def _run(self, sandbox, command):
        workdir = self.workdir(sandbox["id"])
        workdir.mkdir(parents=True, exist_ok=True)
        env = {"PATH": f"{self._bin}:/usr/bin:/bin", "HOME": str(workdir), "LC_ALL": "C.UTF-8", **sandbox["env"]}
        process = subprocess.Popen(["/bin/sh", "-c", command], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.processes.setdefault(sandbox["id"], []).append(process)

    def stop(self, sandbox_id: str) -> None:
        for process in self.processes.pop(sandbox_id, []):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def stop_all(self) -> None:
        for sandbox_id in list(self.processes):
            self.stop(sandbox_id)
        shutil.rmtree(self._root, ignore_errors=True)
