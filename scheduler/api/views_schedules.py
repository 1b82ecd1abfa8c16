"""Schedules over HTTP (SCD-7): create and list, read (with recent fires), change, delete, pause and resume."""

import datetime as dt

from django.http import JsonResponse

from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view, json_body
from scheduler import validation
from scheduler.errors import InvalidInput
from scheduler.periodic import definitions

# Body field -> ScheduleSpec field.
FIELDS = {"orgId": "org_id", "name": "name", "cron": "cron", "timezone": "timezone",
          "launchTemplate": "launch_template", "overlap": "overlap", "catchUp": "catch_up", "paused": "paused"}
REQUIRED = ("orgId", "name", "cron", "launchTemplate")


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _spec_fields(body: dict) -> dict:
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"{unknown[0]} is not a schedule field ({', '.join(FIELDS)})", field=unknown[0])
    return {FIELDS[name]: value for name, value in body.items()}


def _answer(row: dict, fires: list | None = None) -> dict:
    answer = {"scheduleId": row["schedule_id"], "orgId": row["org_id"], "name": row["name"], "cron": row["cron"],
              "timezone": row["timezone"], "launchTemplate": row["launch_template"], "overlap": row["overlap"],
              "catchUp": row["catch_up"], "paused": row["paused"], "nextFireAt": _iso(row["next_fire_at"])}
    if fires is not None:
        answer["recentFires"] = [{"slotAt": _iso(fire["slot_at"]), "outcome": fire["outcome"], "runId": fire["run_id"],
                                  "error": fire["error"]} for fire in fires]
    return answer


@api_view("GET", "POST")
def schedules(request):
    require_internal_token(request)
    if request.method == "POST":
        body = json_body(request)
        missing = [name for name in REQUIRED if name not in body]
        if missing:
            raise InvalidInput(f"{missing[0]} is required", field=missing[0])
        row = definitions.create(definitions.ScheduleSpec(**_spec_fields(body)))
        return JsonResponse({"scheduleId": row["schedule_id"], "nextFireAt": _iso(row["next_fire_at"])}, status=201)
    org, cursor, limit = _list_query(request.GET)
    rows, next_cursor = definitions.page(org, cursor, limit)
    return JsonResponse({"schedules": [_answer(row) for row in rows], "nextCursor": next_cursor})


def _list_query(query) -> tuple[str | None, str | None, int]:
    """GET /internal/schedules?org=&cursor=&limit=: each optional, each checked before anything is read."""
    unknown = sorted(set(query) - {"org", "cursor", "limit"})
    if unknown:
        raise InvalidInput(f"{unknown[0]} is not a parameter of this list (org, cursor, limit)", field=unknown[0])
    org = validation.identifier(query.get("org"), "org", optional=True)
    cursor = validation.text(query.get("cursor"), "cursor", optional=True)
    limit = query.get("limit", "50")
    if not (limit.isascii() and limit.isdigit()) or not 1 <= int(limit) <= definitions.MAX_PAGE:
        raise InvalidInput(f"limit must be an integer between 1 and {definitions.MAX_PAGE}", field="limit")
    return org, cursor, int(limit)


@api_view("GET", "PATCH", "DELETE")
def schedule(request, schedule_id):
    require_internal_token(request)
    if request.method == "DELETE":
        definitions.delete(schedule_id)
        return JsonResponse({"scheduleId": schedule_id, "deleted": True})
    if request.method == "PATCH":
        definitions.update(schedule_id, _spec_fields(json_body(request)))
    return JsonResponse(_answer(definitions.read(schedule_id), definitions.recent_fires(schedule_id)))


@api_view("POST")
def pause(request, schedule_id):
    require_internal_token(request)
    definitions.set_paused(schedule_id, True)
    return JsonResponse(_answer(definitions.read(schedule_id)))


@api_view("POST")
def resume(request, schedule_id):
    require_internal_token(request)
    definitions.set_paused(schedule_id, False)
    return JsonResponse(_answer(definitions.read(schedule_id)))
