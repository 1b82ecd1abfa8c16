"""Runs, newest first, a page at a time (keyset pagination): the read behind GET /internal/runs and list_runs."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scheduler import db, keyset
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


def page(filters: RunFilter, *, cursor: str | None = None, limit: int = 50) -> tuple[list[dict], str | None]:
    """One page of runs and the cursor of the next one (None on the last page)."""
    created, run_id = _after(cursor) if cursor else (None, None)
    return keyset.page(lambda size: db.fetch_all("runs_list_page", {
        "status": filters.status, "org_id": filters.org_id, "release_id": filters.release_id,
        "play_name": filters.play_name, "created_after": filters.created_after,
        "queued_because": filters.queued_because, "default_max_active": scheduler_settings.org_max_active,
        "cursor_created_at": created, "cursor_run_id": run_id, "limit": size,
    }), limit, MAX_PAGE, lambda row: (row["created_at"].isoformat(), row["run_id"]))


def _after(cursor: str) -> tuple[dt.datetime, str]:
    created_at, run_id = keyset.decode(cursor, 2)
    try:
        return dt.datetime.fromisoformat(created_at), run_id
    except ValueError:
        raise InvalidInput("cursor is not one this API gave out", field="cursor") from None
