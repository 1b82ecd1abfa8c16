"""Plain factory functions with keyword overrides (River's testfactory style)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from django.db import connection

from scheduler.runs import lifecycle


def launch(**overrides) -> str:
    fields = {"play_name": "play", "org_id": "org-1", "launch": {}, "max_attempts": 3}
    fields.update(overrides)
    return lifecycle.launch_run(lifecycle.LaunchRequest(**fields)).run_id


@dataclass
class Parked:
    run_id: str
    attempt: int
    lease_token: str
    sandbox_id: str


def claim(run_id: str) -> lifecycle.Claim:
    """Claim exactly `run_id` (other queued runs are left as they were)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE runs SET created_at = created_at - interval '10 years' WHERE run_id = %s", [run_id])
    claims = lifecycle.claim_queued_runs(1)
    assert claims and claims[0].run_id == run_id, claims
    return claims[0]


def parked_run(provider: str = "local", routing_domain: str | None = None, heartbeat_timeout_ms: int = 30_000,
               **launch_overrides) -> Parked:
    run_id = launch(**launch_overrides)
    claimed = claim(run_id)
    sandbox_id = f"sb-{run_id}"
    ref = {"provider": provider, "sandboxId": sandbox_id, "routingDomain": routing_domain}
    resource = {"provider": provider, "sandboxId": sandbox_id, "routingDomain": routing_domain,
                "billingStartedAt": int(dt.datetime.now(dt.UTC).timestamp() * 1000), "cpu": 1, "memoryMb": 512}
    assert lifecycle.park(run_id, claimed.attempt, claimed.lease_token, ref, heartbeat_timeout_ms=heartbeat_timeout_ms,
                          started_at_ms=int(dt.datetime.now(dt.UTC).timestamp() * 1000), resource=resource)
    return Parked(run_id, claimed.attempt, claimed.lease_token, sandbox_id)


def completed_result(output=None, **extra) -> dict:
    return {"status": "completed", "output": output if output is not None else {"ok": True}, **extra}


def failed_result(code: str = "play_error", message: str = "boom", **extra) -> dict:
    return {"status": "failed", "error": {"code": code, "message": message}, **extra}


def recorded_unsettled(run_id: str, attempt: int, result: dict, log_payload=None) -> None:
    """Seed a runner terminal recorded on its attempt but not settled: what an older release, which recorded and
    settled in two statements, leaves when it dies between them (production records and settles in one)."""
    query("UPDATE attempts SET runner_result_json = %s::jsonb, runner_log_payload_json = %s::jsonb, "
          "runner_terminal_received_at = clock_timestamp() WHERE run_id = %s AND attempt = %s",
          [json.dumps(result), None if log_payload is None else json.dumps(log_payload), run_id, attempt])


def query(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchall() if cursor.description else []


def one(sql: str, params=None):
    rows = query(sql, params)
    assert len(rows) == 1, rows
    return rows[0][0] if len(rows[0]) == 1 else rows[0]


def heartbeat_at(run_id: str, attempt: int = 1):
    """The attempt's last liveness fact (None before its first heartbeat)."""
    return one("SELECT heartbeat_at FROM attempts WHERE run_id = %s AND attempt = %s", [run_id, attempt])


def loads(value):
    return json.loads(value) if isinstance(value, str) else value


SCHEDULER_TABLES = (
    "runs", "attempts", "outbox", "control", "runtime_release_admission", "receipts",
    "sandbox_cleanup_jobs", "sandbox_cleanup_jobs_v2", "sandbox_cleanup_events_v2",
    "compute_billing_jobs_v2", "billing_items", "late_runner_results", "operator_actions",
    "org_limits", "org_claim_turns", "org_starts",
)


def table_state() -> dict:
    """A fingerprint of every scheduler table, to prove that a refusal wrote nothing."""
    state = {}
    for table in SCHEDULER_TABLES:
        state[table] = one(f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} AS t")
    return state


def report_terminal(run_id: str, attempt: int, lease_token: str, result: dict, progress_events: list | None = None,
                    log_payload=None) -> dict:
    """A runner's terminal report as the runner sees its answer: recorded and settled in one statement, as JSON."""
    from scheduler.api import responses
    from scheduler.runs import settlement

    item = settlement.Settlement(run_id, attempt, lease_token, result, progress_events, log_payload, from_runner=True)
    return responses.terminal(settlement.ingest_runner_terminal(item))
