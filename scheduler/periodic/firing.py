"""The fire (SCD-2, SCD-4, SCD-5): each slot of a due schedule in one transaction of its own.

The transaction locks the schedule (SKIP LOCKED, so any number of loops share the due ones), decides what the
slot becomes (launched, or skipped for catch-up, overlap or a closed release, or refused), launches its run
through the same statement and admission fence as `POST /internal/runs` with the idempotency key
`schedule:<id>:<slot>`, records the fire (primary key (schedule_id, slot_at): a slot cannot fire twice) and moves
the schedule to its next slot. A loop that dies mid-fire rolls all of it back; the next one fires the slot.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from dataclasses import dataclass

from django.db import transaction

from scheduler import db
from scheduler.errors import ReleaseClosed, SchedulerError
from scheduler.kinds import TERMINAL_RUN_STATUSES, FireOutcome, RunStatus, ScheduleCatchUp, ScheduleOverlap
from scheduler.runs import launch_body, lifecycle
from scheduler.periodic import slots
from scheduler.tick import Tick

logger = logging.getLogger("scheduler.schedules")

# SCD-4: a slot reached within this long after it fell due is on time, whatever the catch-up policy; past it, a
# slot that is the latest one due counts as missed for `skip`.
ON_TIME = dt.timedelta(seconds=60)
CATCH_UP_ALL = 100  # SCD-4: `all` fires at most this many missed slots (the latest ones)
IDLE_CAP_S = 3600.0


@dataclass(frozen=True)
class Fired:
    schedule_id: str
    slot_at: dt.datetime
    outcome: FireOutcome
    run_id: str | None = None
    error: str | None = None


def idempotency_key(schedule_id: str, slot_at: dt.datetime) -> str:
    """`schedule:<id>:<slot UTC>`; the slots a daylight-saving gap gathers at one instant differ in microseconds."""
    moment = slot_at.astimezone(dt.UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if moment.microsecond else "%Y-%m-%dT%H:%M:%SZ")
    return f"{launch_body.SCHEDULE_KEY_PREFIX}{schedule_id}:{text}"


def _missed(schedule: dict, later_due: int, slot_at: dt.datetime, now: dt.datetime) -> bool:
    """SCD-4: whether the catch-up policy passes over this slot (`later_due` more slots of it are due already)."""
    policy = ScheduleCatchUp(schedule["catch_up"])
    if not later_due:  # the latest slot due
        return policy is ScheduleCatchUp.SKIP and now - slot_at > ON_TIME
    return policy is not ScheduleCatchUp.ALL or later_due >= CATCH_UP_ALL


def _after(schedule: dict, slot_at: dt.datetime, now: dt.datetime) -> tuple[int, dt.datetime]:
    """How many slots after this one are due already (at most CATCH_UP_ALL), and the slot that follows it: one walk
    of the cron serves both (cronsim was a third of a fire's Python)."""
    following = slots.upcoming(schedule["cron"], schedule["timezone"], slot_at)
    next_slot = next(following)
    later_due = sum(1 for _ in itertools.islice(itertools.takewhile(
        lambda slot: slot <= now, itertools.chain([next_slot], following)), CATCH_UP_ALL))
    return later_due, next_slot


def launch(schedule: dict, slot_at: dt.datetime) -> Fired:
    """The slot's run through the launch (RUN-1, ADM-5, FSH-5); a closed release or a refused template is the
    slot's outcome, never an error of the loop."""
    body = {**schedule["launch_template"], "orgId": schedule["org_id"],
            "idempotencyKey": idempotency_key(schedule["schedule_id"], slot_at)}
    try:
        launched = lifecycle.launch_run(launch_body.launch_request(body, scheduled=True))
    except ReleaseClosed as error:
        return Fired(schedule["schedule_id"], slot_at, FireOutcome.SKIPPED_CLOSED_RELEASE, error=error.message)
    except SchedulerError as error:
        return Fired(schedule["schedule_id"], slot_at, FireOutcome.REFUSED, error=error.message[:1000])
    return Fired(schedule["schedule_id"], slot_at, FireOutcome.LAUNCHED, run_id=launched.run_id)


def _decide(schedule: dict, later_due: int, slot_at: dt.datetime, now: dt.datetime) -> Fired:
    schedule_id = schedule["schedule_id"]
    if _missed(schedule, later_due, slot_at, now):
        return Fired(schedule_id, slot_at, FireOutcome.SKIPPED_CATCH_UP)
    overlap = ScheduleOverlap(schedule["overlap"])
    if overlap is not ScheduleOverlap.ALLOW:
        previous = db.fetch_one("schedule_fires_read_previous_run", {"schedule_id": schedule_id, "slot_at": slot_at})
        if previous is not None and RunStatus(previous["status"]) not in TERMINAL_RUN_STATUSES:
            if overlap is ScheduleOverlap.SKIP:
                return Fired(schedule_id, slot_at, FireOutcome.SKIPPED_OVERLAP, error=f"run {previous['run_id']} "
                             f"is still {previous['status']}")
            lifecycle.cancel_run(previous["run_id"], f"cancelled by schedule {schedule_id}'s next slot")
    return launch(schedule, slot_at)


def fire_next(now: dt.datetime | None = None) -> Fired | None:
    """Fire the slot due first among the schedules no other loop holds; None when none is due."""
    with transaction.atomic():
        schedule = db.fetch_one("schedules_lock_due", {"now": now})
        if schedule is None:
            return None
        slot_at = schedule["next_fire_at"]
        now = now or dt.datetime.now(dt.UTC)
        later_due, next_slot = _after(schedule, slot_at, now)
        fired = _decide(schedule, later_due, slot_at, now)
        db.fetch_one("schedule_fires_record", {
            "schedule_id": fired.schedule_id, "slot_at": slot_at, "run_id": fired.run_id,
            "outcome": fired.outcome, "error": fired.error,
            "next_fire_at": next_slot,
        })
    return fired


def run_once(limit: int = 100, now: dt.datetime | None = None) -> Tick:
    """Up to `limit` slots, each in its own transaction; a full batch goes again, an idle one sleeps until the
    next slot falls due."""
    counts = {outcome.value: 0 for outcome in FireOutcome}
    for _ in range(limit):
        fired = fire_next(now)
        if fired is None:
            break
        counts[fired.outcome] += 1
        # The loop logs one line per tick with these counts; a slot gets a line of its own only when refused.
        logger.log(logging.WARNING if fired.outcome is FireOutcome.REFUSED else logging.DEBUG,
                   "schedule %s slot %s: %s%s", fired.schedule_id, fired.slot_at.isoformat(), fired.outcome,
                   f" run={fired.run_id}" if fired.run_id else f" ({fired.error})" if fired.error else "")
    else:
        return Tick(counts, again=True)
    upcoming = db.fetch_value("schedules_next_due")
    due_in = None if upcoming is None else (upcoming - dt.datetime.now(dt.UTC)).total_seconds()
    return Tick(counts, due_in=min(IDLE_CAP_S, max(0.0, due_in)) if due_in is not None else None)
