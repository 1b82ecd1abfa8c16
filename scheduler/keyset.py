"""Keyset pages (GET /internal/runs, GET /internal/schedules, their commands): a page's cursor names the sort key
of the last row it ended on, so the next page starts just after it however the rows before it changed."""

from __future__ import annotations

import base64
import json
from typing import Any, Callable

from scheduler import validation
from scheduler.errors import InvalidInput


def encode(*key: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def decode(cursor: str, size: int) -> list[str]:
    """The key a cursor of `size` parts carries; one 400 naming `cursor` for anything this API did not give out."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode())
    except (ValueError, UnicodeDecodeError):
        key = None
    if (not isinstance(key, list) or len(key) != size
            or not all(isinstance(part, str) and not validation.text_problem(part) for part in key)):
        raise InvalidInput("cursor is not one this API gave out", field="cursor")
    return key


def page(fetch: Callable[[int], list[dict]], limit: int, most: int,
         key_of: Callable[[dict], tuple[str, ...]]) -> tuple[list[dict], str | None]:
    """One page of at most `limit` (≤ `most`) rows, read one past it, and the next page's cursor (None: the last)."""
    size = min(limit, most)
    rows = fetch(size + 1)
    return rows[:size], encode(*key_of(rows[size - 1])) if len(rows) > size else None
