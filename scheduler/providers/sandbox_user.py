"""Who a local sandbox's play runs as: never the scheduler's own root.

A play in a local sandbox is a process on the scheduler's machine. Run as the
scheduler's user it could read the scheduler's environment (the internal
token, SECRET_KEY, DATABASE_URL) from /proc; so when the scheduler runs as
root, local sandboxes run as a dedicated unprivileged user, created on first
use. Local sandboxes remain a development tool (see registry.local_start_refusal).
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from scheduler.providers.base import ProviderError

logger = logging.getLogger("scheduler.providers")


def account(name: str | None) -> tuple[int, int] | None:
    """(uid, gid) of the sandbox user, created when missing; None when plays need not change user."""
    if not name or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        created = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                                  "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)
        if created.returncode != 0 and "already exists" not in created.stderr:
            raise ProviderError(f"could not create the local sandbox user {name}: {created.stderr.strip()[:200]}",
                                permanent=True) from None
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def make_traversable(path: Path) -> None:
    """Let other users pass through `path` and its parents (search permission only: nothing becomes readable)."""
    for directory in [path, *path.parents]:
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH:
            directory.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _usable_by_others(executable: Path) -> bool:
    resolved = executable.resolve()
    if not resolved.stat().st_mode & stat.S_IXOTH:
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in resolved.parents)


def python_for(sandbox_account: tuple[int, int] | None) -> str:
    """An interpreter the sandbox's user can run: the project's own, whose packages a task needs (TSK-5).

    When the sandbox user cannot reach it (a Python under root's 0700 home), the directories above it get search
    permission for others, as the sandbox root's do: nothing becomes listable or readable that was not. Where that
    cannot be done, the system's python3, which runs plays but not tasks (they need Django), said in one line.
    """
    if sandbox_account is None or _usable_by_others(Path(sys.executable)):
        return sys.executable
    try:
        make_traversable(Path(sys.executable).parent)
        make_traversable(Path(sys.executable).resolve().parent)
    except OSError as error:
        logger.warning("local sandboxes: the sandbox user cannot run %s (%s); plays use the system's python3, "
                       "and tasks will fail to import Django", sys.executable, error.strerror)
        return shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
    logger.info("local sandboxes: gave other users search permission on the directories above %s so the sandbox "
                "user can run the project's interpreter", sys.executable)
    return sys.executable
