"""The runner carried into a remote sandbox by its start (PRV-3, PRV-5).

A remote image holds the user's plays and a Python 3.12+ interpreter, not this scheduler. A start therefore
brings the runner package (scheduler/sandbox/, standard library only) itself. Daytona gets one file, a
bootstrap: an ASCII Python script holding the package's sources, which writes them beside itself on first run,
puts them first on PYTHONPATH (the image's own path after them, for the plays) and becomes the runner. One text
file because a start uploads one file, and text survives any proxy between here and the toolbox (a binary zip
did not survive Prism's). Modal adds the package to the image as a directory (unpacked_runner).
The package's `scheduler/__init__.py` is empty there: the host's package __init__ belongs to the Django app.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shlex
import shutil
import tempfile
from pathlib import Path

SANDBOX_PACKAGE = Path(__file__).resolve().parent.parent / "sandbox"
RUNNER_MODULE = "scheduler.sandbox.runner"

_BOOTSTRAP = '''"""This scheduler's runner, carried into the sandbox by its start (made by scheduler/providers/runner_bundle.py)."""
import os
import sys

SOURCES = {sources}
here = os.path.splitext(os.path.abspath(__file__))[0]
if not os.path.isdir(here):
    staging = "%s.%d" % (here, os.getpid())
    for name, text in SOURCES.items():
        path = os.path.join(staging, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    try:
        os.rename(staging, here)
    except OSError:
        if not os.path.isdir(here):
            raise
inherited = os.environ.get("PYTHONPATH")
os.environ["PYTHONPATH"] = here + (os.pathsep + inherited if inherited else "")
os.execv(sys.executable, [sys.executable, "-m", "{module}"] + sys.argv[1:])
'''


@functools.cache
def sources() -> dict[str, str]:
    """The runner package, path -> source text (sorted, so the same sources make the same bundle)."""
    found = {"scheduler/__init__.py": ""}
    for source in sorted(SANDBOX_PACKAGE.glob("*.py")):
        found[f"scheduler/sandbox/{source.name}"] = source.read_text(encoding="utf-8")
    return found


@functools.cache
def bootstrap() -> bytes:
    """The one file a Daytona start uploads: ASCII only (non-ASCII source characters are escaped)."""
    return _BOOTSTRAP.replace("{sources}", ascii(sources())).replace("{module}", RUNNER_MODULE).encode("ascii")


@functools.cache
def bootstrap_path(directory: str = "/tmp") -> str:
    """Where a start puts the bootstrap: named by its content, so two versions never share a path."""
    digest = hashlib.sha256(bootstrap()).hexdigest()[:16]
    return f"{directory.rstrip('/')}/scheduler-runner-{digest}.py"


def shell_command(python: str, bootstrap_file: str) -> str:
    """The shell line that runs the runner through its bootstrap, its output in the runner's log."""
    return f"exec {shlex.quote(python)} {shlex.quote(bootstrap_file)} > runner.log 2>&1"


@functools.cache
def unpacked_runner() -> str:
    """The runner package as a directory of its own (`scheduler/__init__.py` empty, `scheduler/sandbox/`), for
    providers that add a directory to an image (Modal's Image.add_local_dir) rather than take a file."""
    root = Path(tempfile.mkdtemp(prefix="scheduler-runner-"))
    for name, text in sources().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    atexit.register(_remove_if_made_here, root, os.getpid())
    return str(root)


def _remove_if_made_here(root: Path, maker: int) -> None:
    """At exit, by the process that made it: each start of a dispatcher process left one behind. A forked child
    (a gunicorn worker of a preloading master) leaves its parent's to the parent."""
    if os.getpid() == maker:
        shutil.rmtree(root, ignore_errors=True)


def modal_shell_command(python: str, runner_root: str) -> str:
    """The runner from the directory the image carries, the image's own PYTHONPATH after it."""
    quoted = shlex.quote(runner_root)
    return f"PYTHONPATH={quoted}${{PYTHONPATH:+:$PYTHONPATH}} exec {shlex.quote(python)} -m {RUNNER_MODULE}"
