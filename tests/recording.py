"""First-write-wins recording of a runner terminal without settling it (TRM-1..3), for tests only.

Production records and settles in one statement (attempts_settle), and the
sweep records its verdicts with attempts_record_parked_verdict. Tests that
need a recorded-but-unsettled terminal, or a synthetic loss fenced on a
heartbeat identity, use this statement, kept in tests/sql/.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection

from scheduler import sql
from scheduler.conf import scheduler_settings

_ORDINARY = object()
HEARTBEAT_IDENTITY = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_BLOCKS = sql.parse_blocks((Path(__file__).parent / "sql" / "recording.sql").read_text(), "recording.sql")


@dataclass(frozen=True)
class RecordOutcome:
    attempt_exists: bool
    lease_matches: bool
    recorded: bool
    is_this_result: bool


def record_runner_terminal(run_id: str, attempt: int, result: dict, *, lease_token: str | None = None,
                           progress_events: list | None = None, log_payload: Any = None,
                           expected_heartbeat_identity: Any = _ORDINARY) -> RecordOutcome:
    """Record first-write-wins; a synthetic loss passes the heartbeat identity it saw (None: no heartbeat ever)."""
    synthetic = expected_heartbeat_identity is not _ORDINARY
    if synthetic and expected_heartbeat_identity is not None:
        assert HEARTBEAT_IDENTITY.fullmatch(expected_heartbeat_identity), expected_heartbeat_identity
    envelope = dict(result)
    if progress_events:
        envelope["terminalProgressEvents"] = progress_events
    statement = _BLOCKS["attempts_record_terminal"].replace("__schema__", f'"{scheduler_settings.schema}"')
    with connection.cursor() as cursor:
        cursor.execute(statement, {
            "run_id": run_id, "attempt": attempt, "lease_token": lease_token, "result": json.dumps(envelope),
            "log_payload": None if log_payload is None else json.dumps(log_payload), "synthetic": synthetic,
            "expected_heartbeat_at": expected_heartbeat_identity if synthetic else None,
        })
        row = cursor.fetchone()
    return RecordOutcome(*row)
