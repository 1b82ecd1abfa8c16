"""The soak's worker logs: each kind's output appended to a file of its own, and its warnings counted per step.

Why: a worker survives a failed tick by logging one line and backing off, so a step whose lag jumps may hide a
run of failed ticks; with the logs thrown away nothing says which. The workers log at WARNING and above here,
so the files stay small.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

LEVELS = (" WARNING ", " ERROR ", " CRITICAL ")


class WorkerLogs:
    def __init__(self):
        self.directory = Path(tempfile.mkdtemp(prefix="soak-worker-logs-"))

    def open(self, kind: str):
        """The file a (re)started worker of `kind` writes to: appended, so a restart keeps what came before."""
        return open(self.directory / f"{kind}.log", "ab")

    def warnings(self) -> dict[str, int]:
        """Per kind, the lines at WARNING or above logged so far (a traceback counts once, by its first line)."""
        counts = {}
        for path in sorted(self.directory.glob("*.log")):
            with open(path, errors="replace") as lines:
                counts[path.stem] = sum(1 for line in lines if any(level in line for level in LEVELS))
        return counts

    def discard_if_quiet(self) -> None:
        """Remove the directory when nothing was logged (a stack per comparison arm would otherwise leave dozens); a
        second call (a `finally` stopping a stack already stopped) finds it gone and leaves it so."""
        if not self.directory.exists():
            return
        files = list(self.directory.glob("*.log"))
        if all(path.stat().st_size == 0 for path in files):
            for path in files:
                path.unlink()
            self.directory.rmdir()


def since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The warnings logged between two counts, by kind, leaving out the kinds that logged none."""
    return {kind: count - before.get(kind, 0) for kind, count in after.items() if count > before.get(kind, 0)}
