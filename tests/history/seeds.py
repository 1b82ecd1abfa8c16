"""Finished runs written directly with a row in every table a run owns (what a run leaves after its whole life)."""

from __future__ import annotations

import json

from tests.factories import query

RUN_TABLES = ("runs", "attempts", "outbox", "receipts", "late_runner_results", "sandbox_cleanup_jobs_v2",
              "sandbox_cleanup_events_v2", "sandbox_cleanup_jobs", "compute_billing_jobs_v2", "run_ledger_events")


def finished_run(run_id: str, days_ago: float, *, fact_delivered: bool = True, cleanup: str = "deleted",
                 legacy: str = "deleted", billing: str = "finalized", schedule_id: str | None = None) -> str:
    """A completed run finished `days_ago`, with two attempts, facts, a receipt, a late result, a cancel key, a
    cleanup job (tombstone by default) with its events, a legacy row, a billing job and item, ledger events."""
    finished = f"now() - interval '{days_ago} days'"
    query(f"INSERT INTO runs (run_id, org_id, play_name, status, launch_json, created_at, updated_at, started_at, "
          f"finished_at) VALUES (%s, 'org-old', 'tests.plays:hello', 'completed', '{{}}', {finished}, {finished}, "
          f"{finished}, {finished})", [run_id])
    for attempt, status in ((1, "failed"), (2, "completed")):
        query(f"INSERT INTO attempts (run_id, attempt, status, created_at, updated_at, finished_at) "
              f"VALUES (%s, %s, %s, {finished}, {finished}, {finished})", [run_id, attempt, status])
    for number, kind in enumerate(("run.created", "run.completed")):
        delivered = finished if fact_delivered or number == 0 else "NULL"
        query(f"INSERT INTO outbox (event_id, run_id, event_type, created_at, delivered_at) "
              f"VALUES (%s, %s, %s, {finished} + interval '{number} ms', {delivered})",
              [f"{run_id}:{kind}", run_id, kind])
        query(f"INSERT INTO run_ledger_events (event_id, run_id, event_type, occurred_at) VALUES (%s, %s, %s, {finished})",
              [f"{run_id}:{kind}", run_id, kind])
    query("INSERT INTO receipts (run_id, key, status, run_attempt) VALUES (%s, 'charge-card', 'completed', 1)", [run_id])
    query("INSERT INTO late_runner_results (run_id, attempt, result_json) VALUES (%s, 1, '{}')", [run_id])
    query("INSERT INTO control (key, value_json) VALUES ('runtime_cancel:' || %s, '{\"runEndedAt\": 1}')", [run_id])
    sandbox = f"sb-{run_id}"
    query("INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, routing_domain, "
          f"status, deleted_at) VALUES ('daytona', %s, %s, 2, 'production', 'org-old', %s, "
          f"CASE WHEN %s = 'deleted' THEN {finished} END)", [sandbox, run_id, cleanup, cleanup])
    query("INSERT INTO sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain, "
          "event_type, details_json) VALUES (gen_random_uuid()::text, 'daytona', %s, %s, 2, 'org-old', "
          "'provider_delete_confirmed', %s::jsonb)",
          [sandbox, run_id, json.dumps({"providerOutcome": "deleted", "routingDomain": "org-old"})])
    query("INSERT INTO sandbox_cleanup_jobs (sandbox_id, run_id, attempt, environment, routing_domain, status) "
          "VALUES (%s, %s, 2, 'production', 'org-old', %s)", [sandbox, run_id, legacy])
    query(f"INSERT INTO compute_billing_jobs_v2 (run_id, status, finalized_at) VALUES (%s, %s, "
          f"CASE WHEN %s = 'finalized' THEN {finished} END)", [run_id, billing, billing])
    query(f"INSERT INTO billing_items (adjustment_session_id, run_id, kind, provider, sandbox_id, billing_started_at, "
          f"billing_ended_at, duration_ms, created_at) VALUES (%s, %s, 'resource', 'daytona', %s, {finished}, "
          f"{finished}, 1000, {finished})", [f"bill-{run_id}", run_id, sandbox])
    if schedule_id:
        query(f"INSERT INTO schedule_fires (schedule_id, slot_at, outcome, run_id) VALUES (%s, {finished}, "
              "'launched', %s)", [schedule_id, run_id])
    return run_id


def rows_of(run_id: str) -> dict[str, int]:
    """How many rows each table holds for `run_id` (control keys and schedule links apart)."""
    return {table: query(f"SELECT count(*) FROM {table} WHERE run_id = %s", [run_id])[0][0] for table in RUN_TABLES}
