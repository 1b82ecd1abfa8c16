"""Runs with a backlog of outbox facts, written directly (delivery is what is under test)."""

import json

from tests.factories import query

TERMINALS = {"completed": "run.completed", "failed": "run.failed"}


def backlog_run(run_id: str, facts: int = 6, launch: dict | None = None, terminal: str | None = "completed",
                lane: str = "ledger", start_second: int = 0, array_input_started: bool = False,
                kinds: list[str] | None = None) -> list[str]:
    """A run with `facts` undelivered facts in causal order; returns their event ids."""
    query(
        "INSERT INTO runs (run_id, org_id, play_name, status, launch_json, array_input_started) "
        "VALUES (%s, 'org', 'p', 'running', %s::jsonb, %s)",
        [run_id, json.dumps(launch or {}), array_input_started],
    )
    if kinds is None:
        kinds = ["run.created", "run.started"] + ["run.progress"] * max(0, facts - 3)
        kinds.append(TERMINALS[terminal] if terminal else "run.progress")
        kinds = kinds[:facts]
    ids = []
    for index, kind in enumerate(kinds):
        event_id = f"{run_id}:{index:03d}:{kind}"
        query(
            "INSERT INTO outbox (event_id, run_id, event_type, payload_json, lane, created_at) "
            "VALUES (%s, %s, %s, %s::jsonb, %s, timestamptz '2026-01-01' + make_interval(secs => %s))",
            [event_id, run_id, kind, json.dumps({"runId": run_id, "n": index}), lane, start_second + index * 0.001],
        )
        ids.append(event_id)
    return ids


def claim_one(lane: str, lease_owner: str, lease_seconds: float = 30.0):
    """Lease the first ready run's prefix as an older release's drainer would (no delivery in place), routed."""
    from scheduler.kinds import HeadPriority
    from scheduler.outbox import claims, routing

    candidates = [row["run_id"] for row in claims.list_ready_runs(lane, HeadPriority.ADMISSION_FIRST, claims.MAX_PREFIX)]
    prefixes = claims.claim(candidates, lane, lease_owner, lease_seconds=lease_seconds, max_runs=1) if candidates else []
    for prefix in prefixes:
        routing.route(prefix)
    return prefixes[0] if prefixes else None
