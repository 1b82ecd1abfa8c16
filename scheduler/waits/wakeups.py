"""What ends a durable wait (WAIT-3, WAIT-4): an event sent to the run, or its deadline passing.

Either queues the waiting run again in one statement (sql/waits.sql) that takes the run's lock first, as a
suspension and a cancel do: of an event, a timer and a cancel racing for one suspension, one wins and the others
find the run no longer waiting.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from scheduler import db, validation
from scheduler.errors import Conflict, NotFound
from scheduler.kinds import RunStatus
from scheduler.tick import Tick

MAX_EVENT_NAME = 200
MAX_EVENT_ID = 200
DEFAULT_WAKE_LIMIT = 1000
IDLE_DUE_CAP_SECONDS = 30.0


class RunFinished(Conflict):
    code = "run_finished"


class EventIdConflict(Conflict):
    code = "event_id_conflict"


@dataclass(frozen=True)
class Event:
    """WAIT-3: an event for one run; its id makes a repeat harmless."""

    run_id: str
    name: str
    payload: Any = None
    event_id: str = ""

    @classmethod
    def checked(cls, run_id: str, name: Any, payload: Any, event_id: Any = None, *, where: str = "") -> "Event":
        """Every field checked before anything is written; a value PostgreSQL cannot store is refused here."""
        name = validation.text(name, f"{where}name", max_length=MAX_EVENT_NAME)
        validation.storable(payload, f"{where}payload")
        event_id = validation.text(event_id, f"{where}eventId", optional=True, max_length=MAX_EVENT_ID)
        return cls(run_id, name, payload, event_id or str(uuid.uuid4()))


@dataclass(frozen=True)
class Sent:
    event_id: str
    stored: bool  # False: a repeat of an event already stored (same name and payload)
    resumed: bool  # the run was waiting for this name and is queued again


def send(event: Event) -> Sent:
    """WAIT-3: store the event (idempotent by id) and resume the run if it waits for its name. 404 unknown run,
    409 a finished run or an id already used with another name or payload; nothing is written then."""
    row = db.fetch_one("run_events_send", {"run_id": event.run_id, "event_id": event.event_id, "name": event.name,
                                           "payload": json.dumps(event.payload)})
    if row["run_status"] is None:
        raise NotFound(f"run {event.run_id} not found")
    if RunStatus(row["run_status"]).terminal:
        raise RunFinished(f"run {event.run_id} is {row['run_status']}: an event can no longer reach it")
    if row["known"] and not row["same_body"]:
        raise EventIdConflict(f"event {event.event_id[:80]!r} was already sent to run {event.run_id} with another "
                              "name or payload", field="eventId")
    return Sent(event.event_id, row["stored"], row["resumed"])


def wake_due(limit: int = DEFAULT_WAKE_LIMIT, now: dt.datetime | None = None) -> Tick:
    """WAIT-4: one tick: queue again up to `limit` runs whose wait deadline passed. A full batch goes again at once;
    otherwise the loop sleeps until the next deadline falls due (at most its interval)."""
    row = db.fetch_one("runs_wake_due_waits", {"limit": limit, "now": now})
    due_in = row["next_due_seconds"]
    return Tick({"woken": row["woken"]}, again=row["woken"] >= limit,
                due_in=None if due_in is None else max(0.0, min(float(due_in), IDLE_DUE_CAP_SECONDS)))


def end_now(run_id: str) -> tuple[str, bool]:
    """WAIT-7: an operator ends a durably waiting run's wait now (it resumes; its wait times out). Answers (the run's
    status before, whether it resumed); 404 unknown run."""
    row = db.fetch_one("runs_end_wait_now", {"run_id": run_id})
    if row is None:
        raise NotFound(f"run {run_id} not found")
    return row["run_status"], row["resumed"]
