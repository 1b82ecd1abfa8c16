"""Runner terminals and settlement (TRM-1..5): one verdict per attempt.

Recording is first-write-wins on the attempt row; settlement is one
statement that moves attempt and run, writes the billing job, the cleanup
obligation and the facts, and is a no-op the second time. Whoever settles
first (the runner's own request or the liveness sweep) wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import psycopg
from django.db import transaction

from scheduler import db, observability
from scheduler.cleanup.billing import WAITING_RECHECK_SECONDS
from scheduler.errors import InvalidInput, LeaseMismatch, NotFound
from scheduler.kinds import RETRYABLE_CODES, SUSPENSION_FALLBACK_PROVIDER


@dataclass(frozen=True)
class Settlement:
    """One attempt to settle: its fences and, for ingress, the runner terminal to record first.

    A null `result` settles what is already recorded (the sweep records its
    verdict first, fenced in its own statement, then settles this way).
    """

    run_id: str
    attempt: int
    lease_token: str | None
    result: dict | None = None
    progress_events: list | None = None
    log_payload: Any = None
    from_runner: bool = False  # the runner's own terminal request (not the sweep's or the dispatcher's)

    def envelope(self) -> str | None:
        if self.result is None:
            return None
        envelope = dict(self.result)
        if self.progress_events:
            envelope["terminalProgressEvents"] = self.progress_events
        return json.dumps(envelope)


@dataclass(frozen=True)
class Settled:
    """What settling one item did. `run_status`/`outcome` are None when nothing was settled
    (already settled, not current, lease mismatch, or no terminal recorded)."""

    run_id: str
    attempt: int
    attempt_exists: bool
    lease_matches: bool
    recorded: bool
    is_this_result: bool
    run_status: str | None
    outcome: str | None


def settle_attempts(settlements: list[Settlement]) -> list[Settled]:
    """TRM-4 (with TRM-1 where a result is given) for many attempts in ONE statement.

    Each item is fenced on its own (lease, current attempt); one answer per
    item, in order. Batching is how a settler keeps up: the statement's fixed
    cost is paid once per batch (River's batch completer does the same for
    job states).
    """
    if not settlements:
        return []
    if len({item.run_id for item in settlements}) != len(settlements):
        raise InvalidInput("a settlement batch names each run once")
    observability.SETTLE_BATCH_SIZE.observe(len(settlements))
    rows = db.fetch_all("attempts_settle", {
        "run_ids": [item.run_id for item in settlements],
        "attempts": [item.attempt for item in settlements],
        "lease_tokens": [item.lease_token for item in settlements],
        "results": [item.envelope() for item in settlements],
        "log_payloads": [None if item.log_payload is None else json.dumps(item.log_payload) for item in settlements],
        "from_runner": [item.from_runner for item in settlements],
        "retryable_codes": list(RETRYABLE_CODES),
        "fallback_provider": SUSPENSION_FALLBACK_PROVIDER,
        "billing_recheck_seconds": WAITING_RECHECK_SECONDS,
    })
    return [Settled(**row) for row in rows]


def settle_attempt(run_id: str, attempt: int, lease_token: str | None, result: dict | None = None, *,
                   progress_events: list | None = None, log_payload: Any = None) -> Settled:
    """TRM-4 (with TRM-1 when `result` is given) for one attempt: one statement records and settles."""
    return settle_attempts([Settlement(run_id, attempt, lease_token, result, progress_events, log_payload)])[0]


@dataclass(frozen=True)
class TerminalAnswer:
    recorded: bool
    settled: bool
    run_status: str | None
    late: bool = False  # arrived after a scheduler verdict settled the attempt; kept beside it


def ingest_runner_terminal(item: Settlement, *, settle: Callable[[Settlement], Settled] | None = None) -> TerminalAnswer:
    """The runner's terminal request: record and settle in one statement. 404 unknown attempt, 409 lease mismatch.

    `settle` runs the settlement (default: its own statement on this thread's
    connection; the web process passes the group settler). A result that
    finds its attempt already settled by a verdict is kept beside it and
    answered late.
    """
    outcome = settle(item) if settle else settle_attempts([item])[0]
    if not outcome.attempt_exists:
        raise NotFound(f"attempt {item.attempt} of run {item.run_id} not found")
    if not outcome.lease_matches:
        raise LeaseMismatch(f"lease does not match attempt {item.attempt} of run {item.run_id}")
    # The recorded result is not this one: if it is a scheduler verdict (settled now by this very statement, or
    # before), this result is late and kept beside it.
    if outcome.recorded and not outcome.is_this_result:
        run_status = keep_late_result(item)
        if run_status is not None:
            return TerminalAnswer(False, False, run_status, late=True)
    return TerminalAnswer(outcome.recorded, outcome.run_status is not None, outcome.run_status)


def keep_late_result(item: Settlement) -> str | None:
    """Store a result that came after its attempt's verdict; the run's actual status, or None when it is no such
    result (the recorded one is the runner's own, not a verdict).

    Reader-first: on a schema without late_runner_results the result is not
    kept and the answer is what it was before that table existed.
    """
    try:
        with transaction.atomic():
            row = db.fetch_one("attempts_keep_late_result", {
                "run_id": item.run_id, "attempt": item.attempt, "lease_token": item.lease_token,
                "result": item.envelope(),
            })
    except psycopg.errors.UndefinedTable:
        return None
    return row["run_status"] if row["late"] else None
