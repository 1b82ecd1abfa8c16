"""Work receipts (RCP-1, RCP-2): a run's steps, memoized across its attempts.

A play claims a receipt per step key; a completed receipt hands its output to
every later claim, so a retried attempt skips what an earlier one finished.
Each call is one statement in sql/receipts.sql taking a batch of keys (a
single call is a batch of one), fenced there on the caller's run being open
and its attempt, with its lease token, being current. Keys in the
scheduler's own namespace (`sys:`) are refused here, every key before any
statement runs (RCP-2); reads see them.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Iterable

from scheduler import db, validation
from scheduler.errors import Conflict, InvalidInput
from scheduler.kinds import RECEIPT_KEY_RESERVED_PREFIX, ReceiptOutcome, ReceiptStatus

MAX_BATCH = 1000
MAX_KEY_LENGTH = 512
LEASE_MS = (1_000, 86_400_000)
DEFAULT_LEASE_MS = 60_000


class AttemptNotCurrent(Conflict):
    code = "attempt_not_current"


class ImmutableReceiptKey(InvalidInput):
    code = "immutable_receipt_key"


@dataclass(frozen=True)
class Caller:
    """The attempt a receipt call speaks for: its run, number and lease token (the runner token's scope)."""

    run_id: str
    attempt: int
    lease_token: str


@dataclass(frozen=True)
class Item:
    """One key of a call; `lease_id` is the receipt lease the caller holds (None: it holds none)."""

    key: str
    lease_id: str | None = None
    output: Any = None
    error: dict | None = None
    final: bool = False


@dataclass(frozen=True)
class ReceiptAnswer:
    key: str
    outcome: ReceiptOutcome
    status: str | None
    changed: bool
    lease_id: str | None
    lease_expires_at: dt.datetime | None
    run_attempt: int | None
    output: Any
    error: dict | None


def check_key(key: Any, name: str) -> str:
    """A receipt key as given (never trimmed: it is the play author's identity of a step)."""
    if not isinstance(key, str) or not key:
        raise InvalidInput(f"{name} must be a non-empty string", field=name)
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(f"{name} must be at most {MAX_KEY_LENGTH} characters", field=name)
    validation.storable(key, name)
    return key


def assert_mutable(keys: Iterable[str], names: Iterable[str] | None = None) -> None:
    """RCP-2: refuse the whole call when any key is the scheduler's own, before anything is sent."""
    keys = list(keys)
    names = list(names) if names is not None else [f"keys[{index}]" for index in range(len(keys))]
    for key, name in zip(keys, names):
        if key.startswith(RECEIPT_KEY_RESERVED_PREFIX):
            raise ImmutableReceiptKey(
                f"{name} {key[:80]!r} is in the scheduler's own namespace ({RECEIPT_KEY_RESERVED_PREFIX}) "
                "and cannot be changed through receipts", field=name)


def _checked(items: list[Item]) -> list[Item]:
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"a receipt call takes at most {MAX_BATCH} keys", field="receipts")
    for index, item in enumerate(items):
        check_key(item.key, f"keys[{index}]")
    assert_mutable(item.key for item in items)
    if len({item.key for item in items}) != len(items):
        raise InvalidInput("a receipt call names each key once", field="receipts")
    return items


def _lease_ms(value: int) -> int:
    return validation.integer(value, "leaseMs", minimum=LEASE_MS[0], maximum=LEASE_MS[1])


# What a call asked for, as the outcome it reports when it wrote the key.
_WRITTEN = {
    "receipts_claim": ReceiptOutcome.CLAIMED, "receipts_complete": ReceiptOutcome.COMPLETED,
    "receipts_fail": ReceiptOutcome.FAILED, "receipts_release": ReceiptOutcome.QUEUED,
    "receipts_skip": ReceiptOutcome.SKIPPED, "receipts_mark_queued": ReceiptOutcome.QUEUED,
    "receipts_heartbeat": ReceiptOutcome.EXTENDED,
}
_STANDING = {ReceiptStatus.COMPLETED: ReceiptOutcome.COMPLETED, ReceiptStatus.SKIPPED: ReceiptOutcome.SKIPPED,
             ReceiptStatus.FAILED: ReceiptOutcome.FAILED}


def _outcome(statement: str, row: dict, item: Item) -> ReceiptOutcome:
    if row["changed"]:
        return _WRITTEN[statement]
    if row["status"] in _STANDING:
        return _STANDING[ReceiptStatus(row["status"])]
    # Running or queued under someone else: a lease holder lost its lease; a claimer must wait for the holder.
    return ReceiptOutcome.LOST if item.lease_id is not None else ReceiptOutcome.HELD


def _call(statement: str, caller: Caller, items: list[Item], **params) -> list[ReceiptAnswer]:
    if not items:
        return []  # RCP-1: an empty batch answers an empty list, as the seed's does; nothing to fence or write
    rows = db.fetch_all(statement, {
        "run_id": caller.run_id, "attempt": caller.attempt, "lease_token": caller.lease_token,
        "keys": [item.key for item in items], **params,
    })
    if not rows or not rows[0]["current"]:
        raise AttemptNotCurrent(
            f"attempt {caller.attempt} of run {caller.run_id} is not the run's current attempt "
            "(settled, superseded, or its lease changed)")
    return [ReceiptAnswer(
        key=row["key"], outcome=_outcome(statement, row, item), status=row["status"], changed=row["changed"],
        lease_id=row["lease_id"], lease_expires_at=row["lease_expires_at"], run_attempt=row["run_attempt"],
        output=row["output"], error=row["error"],
    ) for row, item in zip(rows, items)]


def _lease_ids(items: list[Item], *, required: bool) -> list[str | None]:
    if required:
        for index, item in enumerate(items):
            validation.text(item.lease_id, f"receipts[{index}].leaseId")
    return [item.lease_id for item in items]


def claim(caller: Caller, keys: list[str], lease_ms: int = DEFAULT_LEASE_MS) -> list[ReceiptAnswer]:
    """Claim each key for the caller's attempt (a completed receipt answers with its output)."""
    items = _checked([Item(key) for key in keys])
    return _call("receipts_claim", caller, items, lease_ms=_lease_ms(lease_ms))


def complete(caller: Caller, items: list[Item], *, return_output: bool = True) -> list[ReceiptAnswer]:
    """Complete each key with its output, first write wins; an item without a lease id is the cache insert."""
    items = _checked(items)
    for index, item in enumerate(items):
        validation.storable(item.output, f"receipts[{index}].output")
    return _call("receipts_complete", caller, items, lease_ids=_lease_ids(items, required=False),
                 outputs=[json.dumps(item.output, allow_nan=False) for item in items], return_output=return_output)


def fail(caller: Caller, items: list[Item]) -> list[ReceiptAnswer]:
    """Fail each key the caller's lease holds; `final` keeps later attempts from claiming it again."""
    items = _checked(items)
    errors = []
    for index, item in enumerate(items):
        error = validation.json_object(item.error, f"receipts[{index}].error")
        validation.storable(error, f"receipts[{index}].error")
        errors.append(json.dumps({**error, "final": bool(item.final)}, allow_nan=False))
    return _call("receipts_fail", caller, items, lease_ids=_lease_ids(items, required=True), errors=errors)


def release(caller: Caller, items: list[Item]) -> list[ReceiptAnswer]:
    """Give back each lease the caller holds: the receipt is queued again."""
    items = _checked(items)
    return _call("receipts_release", caller, items, lease_ids=_lease_ids(items, required=True))


def skip(caller: Caller, items: list[Item]) -> list[ReceiptAnswer]:
    """Mark each key skipped (with the caller's lease, or unclaimed where a claim could take it)."""
    items = _checked(items)
    return _call("receipts_skip", caller, items, lease_ids=_lease_ids(items, required=False))


def mark_queued(caller: Caller, keys: list[str]) -> list[ReceiptAnswer]:
    """Declare steps (missing keys become queued) or reset claimable ones to queued."""
    return _call("receipts_mark_queued", caller, _checked([Item(key) for key in keys]))


def heartbeat(caller: Caller, items: list[Item], lease_ms: int = DEFAULT_LEASE_MS) -> list[ReceiptAnswer]:
    """Extend the leases the caller still holds; a lost one answers `lost`."""
    items = _checked(items)
    return _call("receipts_heartbeat", caller, items, lease_ids=_lease_ids(items, required=True),
                 lease_ms=_lease_ms(lease_ms))


def receipts_of(run_id: str) -> list[dict]:
    """A run's receipts in step order (a read: the scheduler's `sys:` keys included)."""
    return db.fetch_all("receipts_list_for_run", {"run_id": run_id})
