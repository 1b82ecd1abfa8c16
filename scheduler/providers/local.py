"""The local provider: a process sandbox on this machine (the embedded default).

A sandbox is a process in its own session (process group) with its own work
folder. Its id carries the pid and the process start time, so a recycled
pid is never mistaken for the sandbox: identity survives pid reuse.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import psutil

from scheduler.kinds import Provider
from scheduler.providers import sandbox_user
from scheduler.providers.base import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxProvider, SandboxRef, StartRequest


def _parse(sandbox_id: str) -> tuple[int, int]:
    try:
        prefix, pid, started_ms = sandbox_id.split("-")
        if prefix != Provider.LOCAL:
            raise ValueError
        return int(pid), int(started_ms)
    except ValueError:
        raise ProviderError(f"not a local sandbox id: {sandbox_id!r}", permanent=True) from None


def _process(sandbox_id: str) -> psutil.Process | None:
    """The live process behind `sandbox_id`, or None when it is gone."""
    pid, started_ms = _parse(sandbox_id)
    try:
        process = psutil.Process(pid)
        if int(process.create_time() * 1000) != started_ms or process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.NoSuchProcess:
        return None


def _group_members(sandbox_id: str) -> list[psutil.Process]:
    """Live processes of the sandbox's process group started no earlier than the sandbox.

    A play can leave children behind after the runner (the group leader)
    exits; they are still the sandbox.
    """
    pgid, started_ms = _parse(sandbox_id)
    members = []
    for process in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if (os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE
                    and int(process.info["create_time"] * 1000) >= started_ms):
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return members


# Sandboxes this process started and that may still run: kept so that each is
# reaped by poll() once it exits, never garbage-collected while it runs.
_started: list[subprocess.Popen] = []


def reap_children() -> None:
    """Collect exited sandbox processes this process started (no zombies left behind)."""
    _started[:] = [process for process in _started if process.poll() is None]
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


TAG_FILE = "sandbox.json"
SCHEDULER_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])


def local_env() -> dict[str, str]:
    """APP-6: a local sandbox imports the launching project's code (SCHEDULER_SANDBOX_PYTHONPATH, else the project's
    BASE_DIR, else where its manage.py is), then the runner from this scheduler's install; a remote sandbox is given
    the runner by its start and the user's code by its image (PRV-3)."""
    from django.conf import settings

    from scheduler.conf import project_import_root, scheduler_settings

    project = scheduler_settings.sandbox_pythonpath or str(getattr(settings, "BASE_DIR", "") or project_import_root())
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([project, SCHEDULER_IMPORT_ROOT])}


class LocalProvider(SandboxProvider):
    name = Provider.LOCAL

    def __init__(self, root: Path, *, refuse_starts: str | None = None, run_as: str | None = None):
        self.root = Path(root)
        self.refuse_starts = refuse_starts
        self.run_as = run_as
        self._account: tuple[int, int] | None | bool = False  # looked up (and the user created) at the first start
        self._runner_python: str | None = None
        self.env = local_env()

    @property
    def account(self) -> tuple[int, int] | None:
        if self._account is False:
            self._account = sandbox_user.account(self.run_as)
            if self._account is not None:
                self.root.mkdir(parents=True, exist_ok=True)
                sandbox_user.make_traversable(self.root)
        return self._account

    @property
    def runner_python(self) -> str:
        if self._runner_python is None:  # stats the interpreter's path: once per process, not once per start
            self._runner_python = sandbox_user.python_for(self.account)
        return self._runner_python

    def workdir(self, sandbox_id: str) -> Path:
        return self.root / sandbox_id

    def start(self, request: StartRequest) -> SandboxRef:
        if self.refuse_starts:
            raise ProviderError(self.refuse_starts, permanent=True)
        reap_children()
        staging = self.root / f"starting-{request.run_id}-{request.attempt}"
        staging.mkdir(parents=True, exist_ok=True)
        identity = {}
        if self.account is not None:
            uid, gid = self.account
            os.chown(staging, uid, gid)
            staging.chmod(0o700)
            identity = {"user": uid, "group": gid, "extra_groups": []}
        log = open(staging / "runner.log", "ab")
        try:
            process = subprocess.Popen(
                request.command, cwd=staging, env={**self.env, **request.env}, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **identity,
            )
        except OSError as exc:
            raise ProviderError(f"local sandbox did not start: {exc.strerror}", permanent=True) from None
        finally:
            log.close()
        _started.append(process)
        try:
            started_ms = int(psutil.Process(process.pid).create_time() * 1000)
        except psutil.NoSuchProcess:
            raise ProviderError("local sandbox exited while starting") from None
        sandbox_id = f"local-{process.pid}-{started_ms}"
        # The tag find_started reads, written before anything else can fail.
        (staging / TAG_FILE).write_text(json.dumps({"runId": request.run_id, "attempt": request.attempt,
                                                     "sandboxId": sandbox_id}))
        staging.rename(self.workdir(sandbox_id))
        return SandboxRef(self.name, sandbox_id, request.routing_domain)

    def find_started(self, run_id: str, attempt: int, routing_domain: str | None) -> list[SandboxRef]:
        found = []
        for tag_path in sorted(self.root.glob(f"*/{TAG_FILE}")):
            try:
                tag = json.loads(tag_path.read_text())
            except (OSError, ValueError):
                continue
            if tag.get("runId") == run_id and tag.get("attempt") == attempt and tag.get("sandboxId"):
                found.append(SandboxRef(self.name, tag["sandboxId"], routing_domain))
        return found

    def inspect(self, ref: SandboxRef) -> Inspection:
        reap_children()
        try:
            return Inspection.RUNNING if _process(ref.sandbox_id) else Inspection.GONE
        except psutil.AccessDenied:
            return Inspection.UNKNOWN

    def delete(self, ref: SandboxRef) -> DeleteOutcome:
        outcome = DeleteOutcome.ALREADY_ABSENT
        members = _group_members(ref.sandbox_id)
        for member in members:
            try:
                member.kill()
                outcome = DeleteOutcome.ACCEPTED
            except psutil.NoSuchProcess:
                pass
            except psutil.AccessDenied:
                raise ProviderError("local sandbox could not be stopped: permission denied", permanent=True) from None
        psutil.wait_procs(members, timeout=5)  # SIGKILL lands asynchronously; our own children are reaped here
        reap_children()
        shutil.rmtree(self.workdir(ref.sandbox_id), ignore_errors=True)
        return outcome

    def live_sandboxes(self) -> list[str]:
        """The ids of the sandboxes under this root whose processes still run."""
        if not self.root.is_dir():
            return []
        return [path.name for path in sorted(self.root.glob(f"{Provider.LOCAL.value}-*"))
                if path.is_dir() and _group_members(path.name)]

    def stop(self, sandbox_ids: list[str], grace: float = 5.0) -> None:
        """SIGTERM each sandbox's processes, then SIGKILL what still runs after `grace`.

        The work folders stay: the runs' cleanup obligations delete them as usual.
        """
        members = [member for sandbox_id in sandbox_ids for member in _group_members(sandbox_id)]
        for member in members:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.terminate()
        _, alive = psutil.wait_procs(members, timeout=grace)
        for member in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        psutil.wait_procs(alive, timeout=grace)
        reap_children()

    def read_back(self, ref: SandboxRef) -> ReadBack:
        reap_children()
        return ReadBack.STILL_PRESENT if _group_members(ref.sandbox_id) else ReadBack.DELETED
