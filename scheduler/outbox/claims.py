"""Stage 1, claim (OBX-2..5, OBX-7): list runs whose lane head is ready, lock them, lease their causal prefixes.

1. List runs whose lane head is ready, in the requested order (no locks).
2. In one short transaction: lock the first of them nobody holds (SKIP
   LOCKED) and read or lease each one's causal prefix of at most 8 facts
   under that lock (the statement's snapshot follows the lock, so it sees
   every committed lease); for a terminal in the prefix, read the
   array-input intent. The prefixes are read, not leased, and handed to the
   caller's `deliver_here` inside this transaction: what that delivers (in
   this database) needs no lease; exactly the facts of the rest are leased.
3. The leased prefixes are the caller's to route, deliver and settle (a
   slow external delivery extends its own leases: receivers/ledger_http.py).

One outbox row is a *fact* (a run fact on its way to the run ledger); the
receiver's copy of it is a ledger *event*.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from typing import Callable

import psycopg
from django.db import DatabaseError, transaction

from scheduler import db, messages
from scheduler.faults import describe
from scheduler.errors import InvalidInput
from scheduler.kinds import TERMINAL_FACT_TYPES, HeadPriority, Lane
from scheduler.outbox.facts import Fact, Prefix
from scheduler.schema import optional_columns

MAX_PREFIX = 8
# OBX-4: a class of at most this many runs (a pending terminal, a pending wait) is listed whole; a larger one walked.
ENUMERATION_BOUND = 256
# OBX-5: how long a claim may wait for a row lock (a stuck transaction elsewhere), and run, before it gives up.
CLAIM_TIMEOUTS = {"lock_timeout": "1000ms", "statement_timeout": "10000ms"}
INTENT_COLUMN = "array_input_started"
# Called inside the claim's transaction with prefixes read under their runs' locks; returns those it delivered.
DeliverHere = Callable[[list[Prefix]], list[Prefix]]


class _Statistics:
    """Whether the last lane survey in this process found the outbox's statistics describing it (issue 47): the
    next survey then runs its generic form. Until a survey says so (at start, and after one that found a backlog
    the statistics have not seen), surveys are planned per call, as the listings are whenever their own look's
    survey did not find the statistics fit."""

    fit = False
    may_analyze: bool | None = None  # asked once per process
    next_try_at = -math.inf  # the time.monotonic() before which this process tries no analyze


# A drainer analyzes the outgrown outbox at most this often (issue 47). Once analyzed, the statistics fit until the
# outbox doubles again, so analyzes come once per doubling; the interval only bounds one skipped by SKIP_LOCKED.
ANALYZE_INTERVAL = 5.0
# After an analyze that failed (a statement timeout on a large outbox, say), the next is tried this much later.
ANALYZE_RETRY_AFTER_ERROR = 600.0
logger = logging.getLogger("scheduler.drain")


def list_ready_runs(lane: Lane, head_priority: HeadPriority, limit: int, exclude_run_ids: list[str] = ()) -> list[dict]:
    """Runs whose lane head is ready, in the order asked for (OBX-4): with admission_first, each of the terminal
    and wait classes is enumerated while small, its heads walked in age order when large (both exact); nothing,
    without listing, when the lane's survey finds no fact that could head a ready run."""
    admission_first = HeadPriority(head_priority) is HeadPriority.ADMISSION_FIRST
    survey = db.fetch_one("outbox_survey_lane_generic" if _Statistics.fit else "outbox_survey_lane", {
        "lane": Lane(lane), "bound": ENUMERATION_BOUND, "admission_first": admission_first})
    _Statistics.fit = bool(survey["statistics_fit"])
    if not survey["any_ready"]:
        return []  # no fact could head a ready run: the listing, the larger statement, would find none
    ways = {**_class_ways("terminals", survey["terminals"]), **_class_ways("waits", survey["waits"])}
    return db.fetch_all(_listing(ways, survey["statistics_fit"]), {
        "lane": Lane(lane), "admission_first": admission_first, "limit": limit,
        "exclude_run_ids": list(exclude_run_ids), **ways})


def analyze_outgrown_outbox(lease_owner: str) -> bool:
    """When this process's last lane survey found the outbox grown past its statistics, analyze it (if this role may,
    at most once per ANALYZE_INTERVAL): the next looks plan their survey and listing once per connection again,
    instead of per call (0.3 ms of planning a run) until autovacuum's analyze. Whether it analyzed."""
    if _Statistics.fit or time.monotonic() < _Statistics.next_try_at:
        return False
    if _Statistics.may_analyze is None:
        _Statistics.may_analyze = bool(db.fetch_value("outbox_may_analyze"))
    if not _Statistics.may_analyze:
        return False
    began = time.monotonic()
    _Statistics.next_try_at = began + ANALYZE_INTERVAL
    try:
        db.execute("outbox_analyze")
    except (psycopg.Error, DatabaseError) as error:
        if transaction.get_connection().in_atomic_block:
            raise  # it aborted the caller's transaction: not this function's to hide
        # Not the tick's failure: its deliveries are done, and the listing works on plans made per call meanwhile.
        _Statistics.next_try_at = time.monotonic() + ANALYZE_RETRY_AFTER_ERROR
        logger.warning("drain %s: analyzing the outbox failed, left to autovacuum for %.0f s: %s", lease_owner,
                       ANALYZE_RETRY_AFTER_ERROR, describe(error))
        return False
    logger.info("drain %s: the outbox had grown past its statistics; analyzed it in %.0f ms", lease_owner,
                (time.monotonic() - began) * 1000)
    return True


def _listing(ways: dict[str, bool], statistics_fit: bool) -> str:
    """The listing statement for a look: the walking one for a large class (rare: planned per call); else the
    usual one, planned once per connection while the statistics fit the outbox, per call otherwise."""
    if ways["walk_terminals"] or ways["walk_waits"]:
        return "outbox_list_ready_runs_walking"
    return "outbox_list_ready_runs_generic" if statistics_fit else "outbox_list_ready_runs"


def _class_ways(name: str, pending: int) -> dict[str, bool]:
    return {f"enumerate_{name}": 0 < pending <= ENUMERATION_BOUND, f"walk_{name}": pending > ENUMERATION_BOUND}


def admission_hints(limit: int, exclude_run_ids: list[str]) -> list[str]:
    """OBX-7: 1-3 ready run ids, excluding <= 32 distinct trimmed in-flight ids; reserves nothing."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 3:
        raise InvalidInput(messages.ADMISSION_HINTS_BOUNDS, field="limit")
    if (not isinstance(exclude_run_ids, (list, tuple)) or len(exclude_run_ids) > 32
            or any(not isinstance(run_id, str) or not run_id or run_id.strip() != run_id for run_id in exclude_run_ids)
            or len(set(exclude_run_ids)) != len(exclude_run_ids)):
        raise InvalidInput(messages.ADMISSION_HINTS_BOUNDS, field="excludeRunIds")
    return [row["run_id"] for row in list_ready_runs(Lane.LEDGER, HeadPriority.ADMISSION_FIRST, limit, list(exclude_run_ids))]


def claim(run_ids: list[str], lane: Lane, lease_owner: str, *, lease_seconds: float, max_runs: int,
          deliver_here: DeliverHere | None = None, locked_out: list[str] | None = None) -> list[Prefix]:
    """Lock up to `max_runs` of `run_ids` nobody holds; return the prefixes leased for delivery elsewhere.

    With `deliver_here`, the locked runs' prefixes are read (not leased) and handed to it inside this
    transaction; exactly the facts of those it does not deliver are then leased, each keeping the route it was
    given. Without it, the prefixes are leased in one statement (an older release's claim). Both re-verify
    readiness under the locks, so a stale candidate (delivered or leased meanwhile) yields nothing. An error
    `deliver_here` raises rolls the whole claim back. `locked_out`, when given, receives every run this claim
    locked, those with nothing left to claim included, so the caller's next claim starts past them.
    """
    def attempt(may_read_intent: bool) -> list[Prefix]:
        group = functools.partial(_prefixes, lane=lane, lease_owner=lease_owner, lease_seconds=lease_seconds,
                                  intent=_intents if may_read_intent else (lambda ids: {}))
        with transaction.atomic():
            locked = {row["run_id"]: row for row in db.fetch_all("outbox_lock_runs", {
                "run_ids": run_ids, "limit": max_runs, "lane": lane, **CLAIM_TIMEOUTS})}
            if not locked:
                leased = {}
            elif deliver_here is not None:
                leased = _read_and_deliver(list(locked), lane, lease_owner, lease_seconds, deliver_here, group, locked)
            else:
                leased = group(db.fetch_all("outbox_lease_prefixes", {
                    "run_ids": list(locked), "lane": lane, "lease_owner": lease_owner, "lease_seconds": lease_seconds,
                    "max_facts": MAX_PREFIX}), locked, leased=True)
        if locked_out is not None:
            locked_out.extend(locked)
        return [leased[run_id] for run_id in locked if run_id in leased]

    return optional_columns.without_column_on_retry(INTENT_COLUMN, attempt)


def _read_and_deliver(run_ids: list[str], lane: Lane, lease_owner: str, lease_seconds: float,
                      deliver_here: DeliverHere, group, locked: dict[str, dict]) -> dict[str, Prefix]:
    """Read the locked runs' prefixes, let `deliver_here` deliver what it can, lease exactly the rest."""
    read = group(db.fetch_all("outbox_read_prefixes", {
        "run_ids": run_ids, "lane": lane, "max_facts": MAX_PREFIX, "terminal_types": list(TERMINAL_FACT_TYPES)}), locked, leased=False)
    delivered = {prefix.run_id for prefix in deliver_here(list(read.values()))} if read else set()
    rest = [prefix for run_id, prefix in read.items() if run_id not in delivered]
    if not rest:
        return {}
    # The intents were read with the prefixes, under the same locks: the leased facts' runs are read no second time.
    leased = group(db.fetch_all("outbox_lease_facts", {
        "event_ids": [fact_id for prefix in rest for fact_id in prefix.fact_ids], "lease_owner": lease_owner,
        "lease_seconds": lease_seconds}), locked, leased=True,
        intent=lambda ids: {run_id: read[run_id].array_input_started for run_id in ids if run_id in read})
    for prefix in rest:
        if prefix.run_id in leased and leased[prefix.run_id].fact_ids == prefix.fact_ids:
            leased[prefix.run_id].route = prefix.route  # the same facts under the same lock: routed once
    return leased


def _intents(run_ids: list[str]) -> dict[str, bool]:
    """SCH-3: the terminal runs' array-input intent; an absent column reads false and is never remembered."""
    if not optional_columns.column_present("runs", INTENT_COLUMN):
        return {}
    return {row["run_id"]: bool(row["array_input_started"])
            for row in db.fetch_all("runs_read_array_input_intents", {"run_ids": run_ids})}


def _prefixes(rows: list[dict], locked: dict[str, dict], *, lane: Lane, lease_owner: str, intent, leased: bool,
              lease_seconds: float) -> dict[str, Prefix]:
    """Group claimed fact rows (ordered by run, then causally) into prefixes, each with its run's org and dispatch
    launch as the lock read them; the runs of terminals read their array-input intent, all in one statement."""
    prefixes: dict[str, Prefix] = {}
    for r in rows:
        prefix = prefixes.get(r["run_id"])
        if prefix is None:
            run = locked[r["run_id"]]
            prefix = prefixes[r["run_id"]] = Prefix(r["run_id"], lane, lease_owner, [], run["dispatch_launch"] or {},
                                                    run["org_id"], leased=leased, lease_seconds=lease_seconds)
        prefix.facts.append(Fact(r["event_id"], r["run_id"], r["event_type"], r["payload_json"], r["created_at"],
                                 r["attempt_count"]))
    terminal = [prefix for prefix in prefixes.values() if prefix.has_terminal]
    if terminal:
        started = intent([prefix.run_id for prefix in terminal])
        for prefix in terminal:
            prefix.array_input_started = started.get(prefix.run_id, False)
    return prefixes
