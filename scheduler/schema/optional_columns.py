"""SCH-3, reader-first: a column a newer release adds may be absent, or dropped while a statement runs.

A reader that can use such a column checks the catalog every time (a
concurrent expansion may add it; nothing is cached), and a statement that
meets 42703 for that column (it vanished between the catalog read and the
statement) is retried once on the path that does without it.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import psycopg

from scheduler import db
from scheduler.conf import scheduler_settings

T = TypeVar("T")


def column_present(table: str, column: str) -> bool:
    """Whether the scheduler's `table` has `column` now, read from the catalog."""
    return bool(db.fetch_value("schema_column_present", {
        "table": f'"{scheduler_settings.schema}".{table}', "column": column}))


def without_column_on_retry(column: str, attempt: Callable[[bool], T]) -> T:
    """`attempt(True)` may read `column`; when a statement meets its absence, `attempt(False)` once, without it."""
    try:
        return attempt(True)
    except psycopg.errors.UndefinedColumn as error:
        if column not in str(error):
            raise
        return attempt(False)
