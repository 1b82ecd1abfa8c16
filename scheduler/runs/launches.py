"""Launches (RUN-1, ADM-5, FSH-5): one at a time, or many in one statement through a web process's group launcher.

Why a group: a launch's cost is mostly the statement's fixed cost and its
commit (two tables, their indexes and triggers); a web process whose request
threads receive launches together inserts them in one statement, each
deduplicated on its own idempotency key, as its terminals share one
settlement (runs/batcher.py). A launch of a release (whose admission it must
lock first) or inside a caller's transaction goes alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from scheduler import db, observability
from scheduler.conf import scheduler_settings
from scheduler.errors import IdempotencyConflict, InvalidInput, ReleaseClosed
from scheduler.runs import admission
from scheduler.runs.batcher import ProcessShared, StatementBatcher


@dataclass(frozen=True)
class Concurrency:
    """FSH-2: at most `limit` active runs of one org hold `key`."""

    key: str
    limit: int


@dataclass(frozen=True)
class LaunchRequest:
    """A validated launch (api/parsing.py builds it from a request body)."""

    play_name: str
    org_id: str | None = None
    input: Any = None
    launch: dict | None = None
    max_attempts: int = 3
    run_log_store: str | None = None
    graph_hash: str | None = None
    runtime_profile: str | None = None
    definition_scope: str | None = None
    wait_deadline: dt.datetime | None = None
    idempotency_key: str | None = None  # FSH-5: one kept run per org and key
    priority: int = 0  # FSH-3: -100..100, higher first within the org
    concurrency: Concurrency | None = None  # FSH-2
    run_after: dt.datetime | None = None  # FSH-7: never claimed before this instant

    def digest(self) -> str:
        """What makes two launches "the same body" (FSH-5): every field, canonically serialized.

        Fields added after FSH-5 shipped count only when set, so a repeat that spans the deploy of a release that
        added them is still the same body.
        """
        fields = dataclasses.asdict(self)
        for name, default in LATER_FIELDS.items():
            if fields[name] == default:
                del fields[name]
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(body.encode()).hexdigest()


# Launch fields added after idempotency keys (FSH-2, FSH-3, FSH-7), with their defaults.
LATER_FIELDS = {"priority": 0, "concurrency": None, "run_after": None}


@dataclass(frozen=True)
class Launched:
    run_id: str
    deduplicated: bool = False  # FSH-5: a repeat of an earlier launch; run_id is that launch's run
    created_at: dt.datetime | None = None  # when the launch inserted it (None for a repeat)


@dataclass(frozen=True)
class PendingLaunch:
    """A launch on its way into a batch: the run id it will get, chosen here (a batch names each run once)."""

    request: LaunchRequest
    run_id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex}")

    @property
    def release_keys(self) -> list[str]:
        launch = self.request.launch or {}
        release_id = launch.get("absurdReleaseId")
        return admission.admission_keys(release_id, launch.get("environment")) if release_id else []

    @property
    def digest(self) -> str | None:
        return self.request.digest() if self.request.idempotency_key is not None else None


def launch_run(request: LaunchRequest) -> Launched:
    """RUN-1/ADM-5: insert a queued run and run.created, refused while its release reads closed; FSH-5: a repeat
    of a keyed launch answers the first run, and the same key with another body is a conflict."""
    answer = launch_all([PendingLaunch(request)])[0]
    if isinstance(answer, Exception):
        raise answer
    return answer


def launch_all(pending: list[PendingLaunch]) -> list[Launched | Exception]:
    """RUN-1 for many launches of one release (or of none) in ONE statement, each deduplicated on its own
    (FSH-5); one answer per launch, in order: its Launched, or the refusal to raise to its caller."""
    if not pending:
        return []
    keys = pending[0].release_keys
    if any(item.release_keys != keys for item in pending[1:]):
        raise InvalidInput("a launch batch names one release")
    # No savepoint inside a caller's transaction (a schedule's fire, a task's enqueue): the refusals below are
    # raised after the block, so only a database fault, which ends the caller's transaction anyway, can leave it.
    # Without release keys the one statement is the whole launch: no transaction of its own (two round trips
    # fewer).
    with transaction.atomic(savepoint=False) if keys else contextlib.nullcontext():
        admission.lock_keys(keys)
        rows = db.fetch_all("runs_launch", {"release_keys": keys, **_columns(pending)})
    observability.LAUNCH_BATCH_SIZE.observe(len(pending))
    return [_answer(item, row) for item, row in zip(pending, rows)]


def _columns(pending: list[PendingLaunch]) -> dict[str, list]:
    requests = [item.request for item in pending]
    return {
        "run_ids": [item.run_id for item in pending], "org_ids": [r.org_id for r in requests],
        "play_names": [r.play_name for r in requests], "graph_hashes": [r.graph_hash for r in requests],
        "runtime_profiles": [r.runtime_profile for r in requests],
        "definition_scopes": [r.definition_scope for r in requests],
        "launches": [json.dumps(r.launch or {}) for r in requests], "inputs": [db.json_param(r.input) for r in requests],
        "run_log_stores": [r.run_log_store for r in requests], "max_attempts": [r.max_attempts for r in requests],
        "wait_deadlines": [r.wait_deadline for r in requests],
        "idempotency_keys": [r.idempotency_key for r in requests],
        "idempotency_digests": [item.digest for item in pending], "priorities": [r.priority for r in requests],
        "run_afters": [r.run_after for r in requests],
        "concurrency_keys": [r.concurrency.key if r.concurrency else None for r in requests],
        "concurrency_limits": [r.concurrency.limit if r.concurrency else None for r in requests],
    }


def _answer(item: PendingLaunch, row: dict) -> Launched | Exception:
    """One launch's answer from its row: inserted, a repeat of an earlier keyed launch, or refused."""
    request, digest = item.request, item.digest
    if row["run_id"] is None and request.idempotency_key is not None:
        first = db.fetch_one("runs_read_by_idempotency_key", {"org_id": request.org_id,
                                                              "idempotency_key": request.idempotency_key})
        if first is not None:
            if first["idempotency_digest"] != digest:
                return IdempotencyConflict(f"idempotencyKey {request.idempotency_key[:80]!r} was used by run "
                                           f"{first['run_id']} with another body", field="idempotencyKey")
            return Launched(first["run_id"], deduplicated=True)
    if row["release_closed"]:
        return ReleaseClosed(f'release "{(request.launch or {}).get("absurdReleaseId")}" is closed to new runs')
    if row["run_id"] is None:  # the key's run was removed between the two reads (retention): say so, write nothing
        return IdempotencyConflict("idempotencyKey's run was just removed; launch again", field="idempotencyKey")
    return Launched(row["run_id"], created_at=row["created_at"])


_process = ProcessShared(lambda: StatementBatcher(launch_all, max_batch=scheduler_settings.launch_batch_size,
                                                  name="batch-launcher"),
                         lambda: scheduler_settings.launch_batch_size)


def shared_launcher() -> StatementBatcher:
    """This process's group launcher, started on first use (after a fork, a new one)."""
    return _process.get()


def launch(request: LaunchRequest) -> Launched:
    """An API launch: through the group launcher when it takes this thread's and the launch names no release
    (whose admission lock is taken per release), on this thread when the group has nothing in flight; else on this
    thread's connection."""
    item = PendingLaunch(request)
    if not _process.takes_this_thread() or item.release_keys:
        return launch_run(request)
    answer = shared_launcher().submit(item, here=lambda: launch_run(request))
    if isinstance(answer, Exception):
        raise answer
    return answer
