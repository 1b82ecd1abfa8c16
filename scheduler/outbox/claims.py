"""The outbox: claim a run's causal prefix, then acknowledge, fail or release it (OBX-2..7).

1. List runs whose lane head is ready, in the requested order (no locks).
2. In one short transaction: lock the first of them nobody holds (SKIP
   LOCKED), lease its causal prefix of at most 8 facts under that lock (the
   lease statement's snapshot follows the lock, so it sees every committed
   lease), and, for a terminal in the prefix, read the array-input intent.
3. Deliver outside any transaction (delivery.py), then acknowledge, or fail
   the head with backoff, or release.

One outbox row is a *fact* (a run fact on its way to the run ledger); the
receiver's copy of it is a ledger *event*.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from dataclasses import dataclass

import psycopg
from django.db import connections, transaction

from scheduler import db, messages
from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput
from scheduler.kinds import TERMINAL_FACT_TYPES, HeadPriority, Lane
from scheduler.loop import backoff_ms, describe

logger = logging.getLogger("scheduler.drain")

MAX_PREFIX = 8
BACKOFF_CAP_MS = 300_000.0


@dataclass
class Fact:
    event_id: str
    run_id: str
    event_type: str
    payload: dict
    created_at: dt.datetime
    attempt_count: int


@dataclass
class Prefix:
    run_id: str
    lane: str
    lease_owner: str
    facts: list[Fact]
    dispatch_launch: dict
    org_id: str | None
    array_input_started: bool = False

    @property
    def head(self) -> Fact:
        return self.facts[0]

    @property
    def fact_ids(self) -> list[str]:
        return [fact.event_id for fact in self.facts]

    @property
    def has_terminal(self) -> bool:
        return any(fact.event_type in TERMINAL_FACT_TYPES for fact in self.facts)


def list_ready_runs(lane: Lane, head_priority: HeadPriority, limit: int, exclude_run_ids: list[str] = ()) -> list[dict]:
    return db.fetch_all("outbox_list_ready_runs", {
        "lane": Lane(lane), "admission_first": HeadPriority(head_priority) is HeadPriority.ADMISSION_FIRST,
        "limit": limit, "exclude_run_ids": list(exclude_run_ids),
    })


def admission_hints(limit: int, exclude_run_ids: list[str]) -> list[str]:
    """OBX-7: 1-3 ready run ids, excluding <= 32 distinct trimmed in-flight ids; reserves nothing."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 3:
        raise InvalidInput(messages.ADMISSION_HINTS_BOUNDS, field="limit")
    if (not isinstance(exclude_run_ids, (list, tuple)) or len(exclude_run_ids) > 32
            or any(not isinstance(run_id, str) or not run_id or run_id.strip() != run_id for run_id in exclude_run_ids)
            or len(set(exclude_run_ids)) != len(exclude_run_ids)):
        raise InvalidInput(messages.ADMISSION_HINTS_BOUNDS, field="excludeRunIds")
    return [row["run_id"] for row in list_ready_runs(Lane.LEDGER, HeadPriority.ADMISSION_FIRST, limit, list(exclude_run_ids))]


def _array_input_started(run_id: str) -> bool:
    """SCH-3: check the catalog first; an absent column reads false and is never remembered."""
    table = f'"{scheduler_settings.schema}".runs'
    if not db.fetch_value("schema_column_present", {"table": table, "column": "array_input_started"}):
        return False
    return bool(db.fetch_value("runs_read_array_input_intent", {"run_id": run_id}))


def _missing_intent_column(error: BaseException) -> bool:
    return isinstance(error, psycopg.errors.UndefinedColumn) and "array_input_started" in str(error)


def claim_prefix(lane: Lane, lease_owner: str, head_priority: HeadPriority = HeadPriority.ADMISSION_FIRST,
                 lease_seconds: float = 30.0) -> Prefix | None:
    """List ready runs, then lease the prefix of the first one nobody holds."""
    candidates = [row["run_id"] for row in list_ready_runs(lane, head_priority, MAX_PREFIX)]
    prefixes = lease_prefixes(candidates, lane, lease_owner, lease_seconds, max_runs=1) if candidates else []
    return prefixes[0] if prefixes else None


def lease_prefixes(run_ids: list[str], lane: Lane, lease_owner: str, lease_seconds: float = 30.0, *,
                   max_runs: int = 8, read_intent: bool = True) -> list[Prefix]:
    """Lock up to `max_runs` of `run_ids` nobody holds and lease each one's causal prefix.

    The lease re-verifies readiness under the locks, so a stale candidate
    (delivered or leased meanwhile) simply yields nothing.
    """
    try:
        with transaction.atomic():
            locked = [row["run_id"] for row in db.fetch_all("outbox_lock_runs", {"run_ids": run_ids, "limit": max_runs})]
            if not locked:
                return []
            rows = db.fetch_all("outbox_lease_prefixes", {
                "run_ids": locked, "lane": lane, "lease_owner": lease_owner,
                "lease_seconds": lease_seconds, "max_facts": MAX_PREFIX,
            })
            prefixes: dict[str, Prefix] = {}
            for r in rows:
                prefix = prefixes.get(r["run_id"])
                if prefix is None:
                    prefix = prefixes[r["run_id"]] = Prefix(r["run_id"], lane, lease_owner, [], r["dispatch_launch"] or {}, r["org_id"])
                prefix.facts.append(Fact(r["event_id"], r["run_id"], r["event_type"], r["payload_json"], r["created_at"], r["attempt_count"]))
            ordered = [prefixes[run_id] for run_id in locked if run_id in prefixes]
            for prefix in ordered:
                if prefix.has_terminal and read_intent:
                    prefix.array_input_started = _array_input_started(prefix.run_id)
            return ordered
    except psycopg.errors.UndefinedColumn as error:
        # The column vanished between the catalog read and the select: the
        # claim rolled back; retry once on the historical path (intent false).
        if not (_missing_intent_column(error) and read_intent):
            raise
        return lease_prefixes(run_ids, lane, lease_owner, lease_seconds, max_runs=max_runs, read_intent=False)


def acknowledge(lease_owner: str, fact_ids: list[str]) -> set[str]:
    """OBX-6: acknowledge the facts of `fact_ids` this drainer still holds; returns those acknowledged."""
    return {row["event_id"] for row in db.fetch_all("outbox_ack", {"event_ids": fact_ids, "lease_owner": lease_owner})}


def fail(prefix: Prefix, error: str, max_attempts: int = 10, backoff_base_ms: float = 500.0) -> bool:
    """OBX-6: count an attempt on the head, back off, mark it failed past the maximum; returns failed."""
    row = db.fetch_one("outbox_fail_prefix", {
        "head_event_id": prefix.head.event_id, "event_ids": prefix.fact_ids, "lease_owner": prefix.lease_owner,
        "error": error[:2000], "backoff_ms": backoff_ms(prefix.head.attempt_count, backoff_base_ms, BACKOFF_CAP_MS),
        "max_attempts": max_attempts,
    })
    return bool(row["failed"])


def release(prefix: Prefix, fact_ids: list[str]) -> int:
    return len(db.fetch_all("outbox_release_facts", {"event_ids": fact_ids, "lease_owner": prefix.lease_owner}))


def release_all(lease_owner: str) -> int:
    return len(db.fetch_all("outbox_release_leases", {"lease_owner": lease_owner}))


def requeue_failed_head(event_id: str) -> bool:
    return bool(db.fetch_all("outbox_requeue_failed_head", {"event_id": event_id}))


@contextlib.contextmanager
def leases_kept(lease_owner: str, fact_ids: list[str], lease_seconds: float):
    """While the block runs (deliveries in flight), extend these leases every third of a lease.

    So a slow receiver never outlasts a lease and no other drainer delivers
    the same facts meanwhile; a drainer that dies stops extending, and its
    leases expire as before.
    """
    stop = threading.Event()

    def keep() -> None:
        try:
            while not stop.wait(lease_seconds / 3):
                db.execute("outbox_extend_leases", {"event_ids": fact_ids, "lease_owner": lease_owner,
                                                    "lease_seconds": lease_seconds})
        except Exception as error:  # noqa: BLE001 - the leases then simply expire, as after a crash
            logger.warning("drain %s: could not extend its leases: %s", lease_owner, describe(error))
        finally:
            connections.close_all()

    keeper = threading.Thread(target=keep, name=f"leases-{lease_owner}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()
