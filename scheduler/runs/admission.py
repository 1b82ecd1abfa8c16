"""Release admission (ADM-1..6): the fence that stops new runs of a draining release.

Every write and every admission-fenced launch takes the release's advisory
locks in one sorted order first, in its own statement, so the statement
that reads the admission row takes its snapshot after any concurrent close
has committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, TypeVar

from django.db import transaction

from scheduler import db, messages, validation
from scheduler.errors import InvalidInput, OpeningRefused
from scheduler.kinds import Environment, values

ENVIRONMENTS = values(Environment)
T = TypeVar("T")


@dataclass(frozen=True)
class Admission:
    accepting: bool
    admission_epoch: int


def admission_keys(release_id, environment=None) -> list[str]:
    """ADM-1: the write keys of a release, `<environment>:<release>` then `<release>`."""
    if not isinstance(release_id, str) or not release_id.strip():
        raise InvalidInput(messages.RELEASE_ID_REQUIRED, field="releaseId")
    release_id = release_id.strip()
    if environment is None:
        return [release_id]
    if environment not in ENVIRONMENTS:
        raise InvalidInput(f"environment must be one of {', '.join(ENVIRONMENTS)}", field="environment")
    return [f"{environment}:{release_id}", release_id]


def lock_keys(keys: list[str]) -> None:
    """Take the transaction-scoped advisory locks of `keys` (caller owns the transaction)."""
    if keys:
        db.run("release_admission_lock", {"keys": keys})


def read_admission(release_id, environment=None) -> Admission | None:
    """ADM-3: highest epoch wins, closed wins a tie; None for an unknown release."""
    row = db.fetch_one("release_admission_read", {"keys": admission_keys(release_id, environment)})
    return None if row is None else Admission(row["accepting"], row["admission_epoch"])


def set_admission(release_id, accepting, admission_epoch, environment=None) -> Admission | None:
    """ADM-4: write every key where the epoch is not older; an opening must land on every key.

    A refused opening raises OpeningRefused and rolls back every key it wrote.
    """
    keys = admission_keys(release_id, environment)
    accepting = validation.boolean(accepting, "accepting")
    epoch = validation.admission_epoch(admission_epoch)
    with transaction.atomic():
        rows = db.fetch_all(
            "release_admission_set", {"keys": keys, "accepting": accepting, "admission_epoch": epoch}
        )
        if accepting and (
            sorted(row["release_id"] for row in rows) != sorted(keys)
            or any(not row["accepting"] or row["admission_epoch"] != epoch for row in rows)
        ):
            raise OpeningRefused(messages.opening_refused(release_id.strip(), epoch))
    return read_admission(release_id, environment)


@dataclass(frozen=True)
class Guarded:
    guarded: bool
    value: object = None


def with_closed_release_admission(release_id, admission_epoch, operation: Callable[[], T], environment=None) -> Guarded:
    """ADM-6: run `operation` under the release's locks only while it is closed at >= epoch."""
    epoch = validation.admission_epoch(admission_epoch)
    keys = admission_keys(release_id, environment)
    with transaction.atomic():
        lock_keys(keys)
        row = db.fetch_one("release_admission_read", {"keys": keys})
        if row is None or row["accepting"] or row["admission_epoch"] < epoch:
            return Guarded(False)
        return Guarded(True, operation())
