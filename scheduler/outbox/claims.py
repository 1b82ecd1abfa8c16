"""The outbox: claim a run's causal prefix, then acknowledge, fail or release it (OBX-2..7).

1. List runs whose lane head is ready, in the requested order (no locks).
2. In one short transaction: lock the first of them nobody holds (SKIP
   LOCKED), read or lease its causal prefix of at most 8 facts under that
   lock (the statement's snapshot follows the lock, so it sees every
   committed lease), and, for a terminal in the prefix, read the array-input
   intent. A prefix bound for this database (the built-in receiver, the
   search lane) is delivered and acknowledged right there, never leased.
3. Deliver a leased prefix outside any transaction (delivery.py), then
   acknowledge, or fail the head with backoff, or release.

One outbox row is a *fact* (a run fact on its way to the run ledger); the
receiver's copy of it is a ledger *event*.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import psycopg
from django.db import connections, transaction

from scheduler import db, messages
from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput
from scheduler.kinds import TERMINAL_FACT_TYPES, HeadPriority, Lane
from scheduler.loop import backoff_ms, describe
from scheduler.outbox import receiver, routing
from scheduler.outbox.facts import Fact, Prefix

logger = logging.getLogger("scheduler.drain")

MAX_PREFIX = 8
BACKOFF_CAP_MS = 300_000.0


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


def _array_input_intents(run_ids: list[str]) -> dict[str, bool]:
    """SCH-3: check the catalog first; an absent column reads false and is never remembered."""
    table = f'"{scheduler_settings.schema}".runs'
    if not db.fetch_value("schema_column_present", {"table": table, "column": "array_input_started"}):
        return {}
    return {row["run_id"]: bool(row["array_input_started"])
            for row in db.fetch_all("runs_read_array_input_intents", {"run_ids": run_ids})}


def _missing_intent_column(error: BaseException) -> bool:
    return isinstance(error, psycopg.errors.UndefinedColumn) and "array_input_started" in str(error)


def claim_prefix(lane: Lane, lease_owner: str, head_priority: HeadPriority = HeadPriority.ADMISSION_FIRST,
                 lease_seconds: float = 30.0) -> Prefix | None:
    """List ready runs, then lease the prefix of the first one nobody holds."""
    candidates = [row["run_id"] for row in list_ready_runs(lane, head_priority, MAX_PREFIX)]
    prefixes = lease_prefixes(candidates, lane, lease_owner, lease_seconds, max_runs=1, in_place=False) if candidates else []
    return prefixes[0] if prefixes else None


def lease_prefixes(run_ids: list[str], lane: Lane, lease_owner: str, lease_seconds: float = 30.0, *,
                   max_runs: int = 8, read_intent: bool = True, in_place: bool = True,
                   locked_out: list[str] | None = None) -> list[Prefix]:
    """Lock up to `max_runs` of `run_ids` nobody holds and claim each one's causal prefix.

    `locked_out`, when given, receives every run this claim locked, those with nothing left to claim included
    (delivered or leased meanwhile): the caller's next claim then starts past them.

    A prefix bound for this database (the built-in receiver, or the search
    lane) is delivered and acknowledged inside this transaction, under its
    run's lock, and comes back with acknowledged_in_place set; any other is
    leased for delivery. Both re-verify readiness under the locks, so a stale
    candidate (delivered or leased meanwhile) simply yields nothing.
    """
    intent = _array_input_intents if read_intent else (lambda run_ids: {})
    try:
        with transaction.atomic():
            rows = db.fetch_all("outbox_lock_runs", {"run_ids": run_ids, "limit": max_runs})
            locked = {row["run_id"]: row for row in rows}
            order = list(locked)
            if locked_out is not None:
                locked_out.extend(order)
            local = [run_id for run_id, row in locked.items()
                     if in_place and routing.may_stay_local(lane, row["dispatch_launch"])]
            claimed, elsewhere = _claim_in_place(local, locked, lane, lease_owner, intent) if local else ({}, [])
            # A local run read with nothing claimable has nothing to lease either: the same lock, the same test.
            remote = [run_id for run_id in order if run_id not in local or run_id in elsewhere]
            if remote:
                claimed.update(_prefixes(db.fetch_all("outbox_lease_prefixes", {
                    "run_ids": remote, "lane": lane, "lease_owner": lease_owner,
                    "lease_seconds": lease_seconds, "max_facts": MAX_PREFIX,
                }), locked, lane, lease_owner, intent))
            return [claimed[run_id] for run_id in order if run_id in claimed]
    except psycopg.errors.UndefinedColumn as error:
        # The column vanished between the catalog read and the select: the
        # claim rolled back; retry once on the historical path (intent false).
        if not (_missing_intent_column(error) and read_intent):
            raise
        return lease_prefixes(run_ids, lane, lease_owner, lease_seconds, max_runs=max_runs, read_intent=False,
                              in_place=in_place, locked_out=locked_out)
    except receiver.STORE_ERRORS as error:
        # Delivering in place failed and rolled the claim back: lease instead, so the ordinary delivery meets the
        # same failure and the failure policy counts it on the head (a failed head an operator sees), never a loop.
        if not in_place:
            raise
        logger.warning("drain %s: delivering in place failed, leasing instead: %s", lease_owner, describe(error))
        return lease_prefixes(run_ids, lane, lease_owner, lease_seconds, max_runs=max_runs, read_intent=read_intent,
                              in_place=False, locked_out=locked_out)


def _prefixes(rows: list[dict], locked: dict[str, dict], lane: Lane, lease_owner: str, intent) -> dict[str, Prefix]:
    """Group claimed fact rows (ordered by run, then causally) into prefixes, each with its run's org and dispatch
    launch as the lock read them; the runs of terminals read their array-input intent, all in one statement."""
    prefixes: dict[str, Prefix] = {}
    for r in rows:
        prefix = prefixes.get(r["run_id"])
        if prefix is None:
            run = locked[r["run_id"]]
            prefix = prefixes[r["run_id"]] = Prefix(r["run_id"], lane, lease_owner, [], run["dispatch_launch"] or {},
                                                    run["org_id"])
        prefix.facts.append(Fact(r["event_id"], r["run_id"], r["event_type"], r["payload_json"], r["created_at"], r["attempt_count"]))
    terminal = [prefix for prefix in prefixes.values() if prefix.has_terminal]
    if terminal:
        started = intent([prefix.run_id for prefix in terminal])
        for prefix in terminal:
            prefix.array_input_started = started.get(prefix.run_id, False)
    return prefixes


def _claim_in_place(run_ids: list[str], locked: dict[str, dict], lane: Lane, lease_owner: str,
                    intent) -> tuple[dict[str, Prefix], list[str]]:
    """Read the runs' claimable prefixes and deliver those bound for this database: (the prefixes delivered,
    the runs read whose prefix goes elsewhere and is leased instead). Only terminal facts come with their
    payload: the rest go from the outbox to the ledger unchanged, in SQL."""
    read = _prefixes(db.fetch_all("outbox_read_prefixes", {
        "run_ids": run_ids, "lane": lane, "lease_owner": lease_owner, "max_facts": MAX_PREFIX,
        "terminal_types": list(TERMINAL_FACT_TYPES),
    }), locked, lane, lease_owner, intent)
    local = {run_id: prefix for run_id, prefix in read.items() if routing.stays_local(prefix)}
    if local:
        receiver.acknowledge_in_place(lease_owner, list(local.values()))
    return local, [run_id for run_id in read if run_id not in local]


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
