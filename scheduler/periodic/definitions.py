"""Schedules as operators define them (SCD-1, SCD-3, SCD-7): create, read, list, pause, resume, preview.

Every value is checked before anything is written (a bad cron, zone or template names its field), and the
template is checked exactly as a launch body, so a schedule that was accepted can launch.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import uuid
from dataclasses import dataclass

import psycopg

from scheduler import db, keyset, validation
from scheduler.errors import Conflict, InvalidInput, NotFound
from scheduler.kinds import ScheduleCatchUp, ScheduleOverlap, values
from scheduler.runs import launch_body
from scheduler.periodic import slots

MAX_PREVIEW = 1000


@dataclass(frozen=True)
class ScheduleSpec:
    org_id: str
    name: str
    cron: str
    timezone: str = "UTC"
    launch_template: dict | None = None
    overlap: str = ScheduleOverlap.ALLOW.value
    catch_up: str = ScheduleCatchUp.LATEST.value
    paused: bool = False


def checked(spec: ScheduleSpec) -> ScheduleSpec:
    """The spec with its cron normalized; InvalidInput naming the first bad field."""
    org_id = validation.identifier(spec.org_id, "orgId")
    name = validation.text(spec.name, "name", max_length=200)
    cron = slots.cron_expression(validation.text(spec.cron, "cron", max_length=200))
    timezone = validation.text(spec.timezone, "timezone", max_length=100)
    slots.zone(timezone)
    template = validation.storable(validation.json_object(spec.launch_template, "launchTemplate"), "launchTemplate")
    if "idempotencyKey" in template:
        raise InvalidInput("launchTemplate.idempotencyKey is set by each fire (schedule:<id>:<slot>)",
                           field="launchTemplate.idempotencyKey")
    if template.get("orgId") not in (None, org_id):
        raise InvalidInput("launchTemplate.orgId must be the schedule's orgId (or left out)",
                           field="launchTemplate.orgId")
    try:
        launch_body.launch_request({**template, "orgId": org_id})
    except InvalidInput as error:
        raise InvalidInput(f"launchTemplate: {error.message}",
                           field=f"launchTemplate.{error.field}" if error.field else "launchTemplate") from None
    return ScheduleSpec(org_id, name, cron, timezone, template,
                        validation.choice(spec.overlap, "overlap", values(ScheduleOverlap)),
                        validation.choice(spec.catch_up, "catchUp", values(ScheduleCatchUp)),
                        validation.boolean(spec.paused, "paused"))


def _name_taken(spec: ScheduleSpec) -> Conflict:
    return Conflict(f"org {spec.org_id} already has a schedule named {spec.name!r}", "schedule_exists", field="name")


def create(spec: ScheduleSpec, now: dt.datetime | None = None) -> dict:
    """SCD-1: a new schedule whose first slot is the first after now; a name its org uses is a conflict."""
    spec = checked(spec)
    first = slots.following(spec.cron, spec.timezone, now or dt.datetime.now(dt.UTC))
    row = db.fetch_one("schedules_insert", {
        "schedule_id": f"sch_{uuid.uuid4().hex}", "org_id": spec.org_id, "name": spec.name, "cron": spec.cron,
        "timezone": spec.timezone, "launch_template": json.dumps(spec.launch_template), "overlap": spec.overlap,
        "catch_up": spec.catch_up, "paused": spec.paused, "next_fire_at": first,
    })
    if row is None:
        raise _name_taken(spec)
    return row


def update(schedule_id: str, changes: dict, now: dt.datetime | None = None) -> dict:
    """SCD-7: `changes` maps ScheduleSpec field names to new values; checked as a whole before anything is written.
    A new cron or zone, or a resume, moves the next slot to the first after now (as `set_paused` resumes)."""
    current = read(schedule_id)
    if "org_id" in changes:
        raise InvalidInput("orgId cannot change; add a schedule to the other org", field="orgId")
    spec = checked(ScheduleSpec(**{**{name: current[name] for name in ScheduleSpec.__dataclass_fields__}, **changes}))
    moved = "cron" in changes or "timezone" in changes or (current["paused"] and not spec.paused)
    try:
        db.fetch_all("schedules_update", {
            "schedule_id": schedule_id, "name": spec.name, "cron": spec.cron, "timezone": spec.timezone,
            "launch_template": json.dumps(spec.launch_template), "overlap": spec.overlap, "catch_up": spec.catch_up,
            "paused": spec.paused,
            "next_fire_at": slots.following(spec.cron, spec.timezone, now or dt.datetime.now(dt.UTC)) if moved else None,
        })
    except psycopg.errors.UniqueViolation:
        raise _name_taken(spec) from None
    return read(schedule_id)


def delete(schedule_id: str) -> None:
    if not db.fetch_all("schedules_delete", {"schedule_id": schedule_id}):
        raise NotFound(f"schedule {schedule_id} not found")


def read(schedule_id: str) -> dict:
    row = db.fetch_one("schedules_read", {"schedule_id": schedule_id})
    if row is None:
        raise NotFound(f"schedule {schedule_id} not found")
    return row


MAX_PAGE = 200


def listed(org_id: str | None = None, limit: int = MAX_PAGE, after: tuple[str, str] | None = None) -> list[dict]:
    """Schedules by org then name, from just after `after` (an (org, name) the last page ended on)."""
    return db.fetch_all("schedules_list", {"org_id": org_id, "limit": limit, "after_org_id": after and after[0],
                                           "after_name": after and after[1]})


def page(org_id: str | None, cursor: str | None, limit: int) -> tuple[list[dict], str | None]:
    """SCD-7: one page of schedules and the cursor of the next one (None on the last page), as GET /internal/runs."""
    after = tuple(keyset.decode(cursor, 2)) if cursor else None
    return keyset.page(lambda size: listed(org_id, size, after), limit, MAX_PAGE,
                       lambda row: (row["org_id"], row["name"]))


def recent_fires(schedule_id: str, limit: int = 20) -> list[dict]:
    return db.fetch_all("schedule_fires_recent", {"schedule_id": schedule_id, "limit": limit})


def set_paused(schedule_id: str, paused: bool, now: dt.datetime | None = None) -> bool:
    """Pause, or resume from the first slot after now; whether anything changed."""
    schedule = read(schedule_id)
    resume_at = None if paused else slots.following(schedule["cron"], schedule["timezone"],
                                                    now or dt.datetime.now(dt.UTC))
    return bool(db.fetch_all("schedules_set_paused", {"schedule_id": schedule_id, "paused": paused,
                                                      "next_fire_at": resume_at}))


def preview(schedule: dict, count: int = 5, after: dt.datetime | None = None) -> list[dt.datetime]:
    """The next `count` slots after `after` (default now), computed exactly as the loop fires them."""
    if not 1 <= count <= MAX_PREVIEW:
        raise InvalidInput(f"next must be between 1 and {MAX_PREVIEW}", field="next")
    start = after or dt.datetime.now(dt.UTC)
    return list(itertools.islice(slots.upcoming(schedule["cron"], schedule["timezone"], start), count))
