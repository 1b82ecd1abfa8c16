"""Every sandbox state Daytona documents (SandboxState and SandboxDesiredState in its OpenAPI document, v0.190.0),
read three ways: by a start waiting for its sandbox (PRV-2), by the sweep's inspect and by cleanup's read-back
(PRV-4). A state the document does not list is never guessed at: a start ends on it, inspect answers unknown.
"""

from __future__ import annotations

import enum

from scheduler.providers.base import Inspection, ReadBack


class StartProgress(enum.Enum):
    STARTED = "started"
    WAITING = "waiting"
    FAILED = "failed"  # error or build_failed: the provider's errorReason says why
    ENDED = "ended"  # stopped, archived or being deleted before it ever ran the runner
    UNDOCUMENTED = "undocumented"


# Its processes run, or will: the sandbox exists and may hold a live runner.
ALIVE = frozenset({"started", "starting", "creating", "restoring", "pulling_snapshot", "pending_build",
                   "building_snapshot", "resizing", "snapshotting", "forking"})
# Frozen, not gone: a paused sandbox's runner resumes with it (its heartbeat timeout judges it meanwhile).
SUSPENDED = frozenset({"pausing", "paused", "resuming"})
# No process of it runs any more, and none will without an explicit start.
ENDED = frozenset({"destroyed", "destroying", "stopped", "stopping", "error", "build_failed", "archived",
                   "archiving"})
# Documented as "unknown": the provider itself does not know.
UNSURE = frozenset({"unknown"})
DOCUMENTED = ALIVE | SUSPENDED | ENDED | UNSURE
FAILED = frozenset({"error", "build_failed"})
# Still on the way to started; every other documented state means this start will not get there.
ON_THE_WAY = frozenset({"creating", "starting", "restoring", "pulling_snapshot", "pending_build",
                        "building_snapshot", "resizing", "unknown"})
DESIRED = frozenset({"destroyed", "started", "stopped", "resized", "archived", "paused"})


def _state(sandbox: dict) -> str:
    return str(sandbox.get("state") or "").lower()


def delete_accepted(sandbox: dict) -> bool:
    """The provider accepted a delete: it keeps the state and sets desiredState destroyed until it is gone."""
    return sandbox.get("desiredState") == "destroyed" or _state(sandbox) in ("destroying", "destroyed")


def start_progress(sandbox: dict) -> StartProgress:
    state = _state(sandbox)
    if state not in DOCUMENTED:
        return StartProgress.UNDOCUMENTED
    if delete_accepted(sandbox):
        return StartProgress.ENDED
    if state == "started":
        return StartProgress.STARTED
    if state in FAILED:
        return StartProgress.FAILED
    return StartProgress.WAITING if state in ON_THE_WAY else StartProgress.ENDED


def inspection(sandbox: dict) -> Inspection:
    """What the sweep learns: gone once its delete is accepted or its processes ended; unknown when nobody knows."""
    state = _state(sandbox)
    if state not in DOCUMENTED or state in UNSURE:
        return Inspection.UNKNOWN
    if delete_accepted(sandbox) or state in ENDED:
        return Inspection.GONE
    return Inspection.RUNNING


def read_back(sandbox: dict) -> ReadBack:
    """Cleanup's confirmation: deleted only when the provider says destroyed (a 404 is read by the caller)."""
    if _state(sandbox) == "destroyed":
        return ReadBack.DELETED
    return ReadBack.STILL_PRESENT if _state(sandbox) in DOCUMENTED else ReadBack.UNKNOWN
