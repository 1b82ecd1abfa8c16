"""Runs, newest first, a page at a time (keyset pagination): the read behind GET /internal/runs and list_runs."""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass

from scheduler import db
from scheduler.conf import scheduler_settings
from scheduler.errors import InvalidInput

MAX_PAGE = 200


@dataclass(frozen=True)
class RunFilter:
    status: str | None = None
    org_id: str | None = None
    release_id: str | None = None
    play_name: str | None = None
    created_after: dt.datetime | None = None
    queued_because: str | None = None  # FSH-9: only queued runs waiting for this reason


def encode_cursor(created_at: dt.datetime, run_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{run_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    try:
        created_at, run_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode().split("|", 1)
        return dt.datetime.fromisoformat(created_at), run_id
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("cursor is not one this API gave out", field="cursor") from None


def page(filters: RunFilter, *, cursor: str | None = None, limit: int = 50) -> tuple[list[dict], str | None]:
    """One page of runs and the cursor of the next one (None on the last page)."""
    created, run_id = decode_cursor(cursor) if cursor else (None, None)
    rows = db.fetch_all("runs_list_page", {
        "status": filters.status, "org_id": filters.org_id, "release_id": filters.release_id,
        "play_name": filters.play_name, "created_after": filters.created_after,
        "queued_because": filters.queued_because, "default_max_active": scheduler_settings.org_max_active,
        "cursor_created_at": created, "cursor_run_id": run_id, "limit": min(limit, MAX_PAGE) + 1,
    })
    more = len(rows) > min(limit, MAX_PAGE)
    rows = rows[:min(limit, MAX_PAGE)]
    return rows, encode_cursor(rows[-1]["created_at"], rows[-1]["run_id"]) if more else None
