"""Runner heartbeats (RUN-4), one by one or many in one statement through a web process's group heartbeater.

Why a group: a heartbeat's cost is almost all the statement's fixed cost and
its commit (one attempt row, most often a HOT update). A web process whose
request threads receive beats concurrently bumps them in one statement, each
fenced on its own, as its terminals share one settlement (runs/batcher.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler import db, observability
from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput
from scheduler.runs.batcher import ProcessShared, StatementBatcher


@dataclass(frozen=True)
class Heartbeat:
    current: bool
    cancel_requested: bool
    heartbeat_identity: str | None


@dataclass(frozen=True)
class Beat:
    run_id: str
    attempt: int
    lease_token: str


def heartbeat_all(beats: list[Beat]) -> list[Heartbeat]:
    """RUN-4 for many attempts in ONE statement, each fenced on its own; one answer per beat, in order."""
    if not beats:
        return []
    if len({beat.run_id for beat in beats}) != len(beats):
        raise InvalidInput("a heartbeat batch names each run once")
    observability.HEARTBEAT_BATCH_SIZE.observe(len(beats))
    rows = db.fetch_all("attempts_heartbeat", {"run_ids": [beat.run_id for beat in beats],
                                               "attempts": [beat.attempt for beat in beats],
                                               "lease_tokens": [beat.lease_token for beat in beats]})
    return [Heartbeat(row["current"], row["cancel_requested"], row["heartbeat_identity"]) for row in rows]


def heartbeat(run_id: str, attempt: int, lease_token: str) -> Heartbeat:
    """RUN-4: bump the current attempt's heartbeat on this thread's connection; currency and a queued cancel."""
    return heartbeat_all([Beat(run_id, attempt, lease_token)])[0]


_process = ProcessShared(lambda: StatementBatcher(heartbeat_all, max_batch=scheduler_settings.heartbeat_batch_size,
                                                  name="batch-heartbeater"),
                         lambda: scheduler_settings.heartbeat_batch_size)


def shared_heartbeater() -> StatementBatcher:
    """This process's group heartbeater, started on first use (after a fork, a new one)."""
    return _process.get()


def beat(run_id: str, attempt: int, lease_token: str) -> Heartbeat:
    """A runner's heartbeat: through the group heartbeater when it takes this thread's (on this thread when the
    group has nothing in flight), else on its connection."""
    if not _process.takes_this_thread():
        return heartbeat(run_id, attempt, lease_token)
    return shared_heartbeater().submit(Beat(run_id, attempt, lease_token),
                                       here=lambda: heartbeat(run_id, attempt, lease_token))
