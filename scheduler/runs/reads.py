"""Reads beside the state changes (the seed's backend offers each): runner liveness, a terminal run's
array-input intent, recorded terminals over several release lanes. Plain SELECTs in sql/reads.sql; none of
them is a fence, and none changes anything.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from scheduler import db
from scheduler.errors import InvalidInput
from scheduler.schema import optional_columns

MAX_LANES = 32
MAX_LANE_LIMIT = 500


@dataclass(frozen=True)
class Liveness:
    heartbeat_at: dt.datetime | None
    heartbeat_identity: str | None  # microsecond text: the value the runner_lost verdict is fenced on
    updated_at: dt.datetime | None
    status: str


@dataclass(frozen=True)
class ArrayInputIntent:
    play_name: str | None
    started: bool


def runner_liveness(run_id: str, attempt: int) -> Liveness | None:
    """The attempt's latest liveness fact, for timeout diagnosis; None when there is no such attempt."""
    row = db.fetch_one("attempts_read_liveness", {"run_id": run_id, "attempt": attempt})
    return None if row is None else Liveness(**row)


def terminal_array_input_intent(run_id: str, org_id: str | None = None) -> ArrayInputIntent:
    """SCH-3, reader-first: a terminal run's intent and play name (bound to `org_id` when given).

    On a schema without runs.array_input_started the answer is (None, False), as the seed's; the catalog is
    read every time (a concurrent expansion may add the column), and a statement that meets 42703 for the
    column is retried once on that path.
    """
    def read(may_read_column: bool) -> ArrayInputIntent:
        if not (may_read_column and optional_columns.column_present("runs", "array_input_started")):
            return ArrayInputIntent(None, False)
        row = db.fetch_one("runs_read_terminal_array_input_intent", {"run_id": run_id, "org_id": org_id})
        return ArrayInputIntent(row["play_name"], bool(row["started"])) if row else ArrayInputIntent(None, False)

    return optional_columns.without_column_on_retry("array_input_started", read)


def recorded_terminals_by_lane(release_ids: list[str], *, include_unreleased: bool = False,
                               lane_limit: int = 100) -> list[dict]:
    """TRM-7 over several lanes in one statement: at most `lane_limit` per lane, the no-release lane if asked."""
    if len(release_ids) > MAX_LANES or not (release_ids or include_unreleased):
        raise InvalidInput(f"name 1 to {MAX_LANES} release lanes (or the lane of runs without a release)",
                           field="release")
    if not 1 <= lane_limit <= MAX_LANE_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LANE_LIMIT}", field="limit")
    return db.fetch_all("attempts_list_recorded_terminals_by_lane", {
        "release_ids": list(release_ids), "include_unreleased": include_unreleased, "lane_limit": lane_limit,
    })
