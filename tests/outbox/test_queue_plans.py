"""The outbox is a queue whose statistics are always stale: the ready listing must not depend on them."""

import re

import psycopg
import pytest
from django.db import connection

from scheduler import db

from tests.support import prepared_text

pytestmark = pytest.mark.django_db


def _listing_plan(statement: str) -> str:
    sql, names = prepared_text(statement)
    params = {"lane": "ledger", "limit": 64, "admission_first": True, "exclude_run_ids": [],
              "enumerate_terminals": False, "walk_terminals": True, "enumerate_waits": False, "walk_waits": True}
    with psycopg.RawCursor(connection.connection) as cursor:
        cursor.execute("EXPLAIN " + sql, [params[name] for name in names])
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize("statement,probes", [("outbox_list_ready_runs", 2), ("outbox_list_ready_runs_walking", 6)])
def test_ready_listing__head_and_lease_checks_stay_per_fact_probes_whatever_the_statistics(statement, probes):
    # Statistics of an empty outbox (what a fresh table or a vacuum after a drained backlog leaves),
    # then a backlog the planner has not seen.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE outbox")
        cursor.execute("""
            INSERT INTO outbox (event_id, run_id, event_type, payload_json)
            SELECT 'queue-' || i, 'queue-run-' || (i % 500), 'run.progress', '{}' FROM generate_series(1, 5000) AS i
        """)
    plan = _listing_plan(statement)
    # Each NOT EXISTS stays a subplan run per candidate fact (a probe by run_id); as a join
    # it was planned as a scan of every undelivered fact for every candidate.
    # (PostgreSQL 15 prints "NOT (SubPlan 1)", 18 "NOT EXISTS(SubPlan 1)".)
    # Two per head walk (every order's; classes 1 and 2 past the bound when walking).
    assert len(re.findall(r"NOT (EXISTS)?\(SubPlan", plan)) == probes, plan
    assert "Anti Join" not in plan, plan
    # A candidate's class and lease check: one aggregate over that run's pending facts, run per candidate (a
    # lateral aggregate is never turned into a join over every pending fact).
    # (The probe's run condition is an Index Cond or a Filter, on the line after the scan or the one after that.)
    per_run = re.findall(r"->  Aggregate .*\n.*Filter: \(NOT bool_or.*\n.*->  Index (?:Only )?Scan .*\n(?:.*\n)?"
                         r".*candidate_runs\.run_id", plan)
    assert len(per_run) == 1, plan


def test_outbox__vacuumed_and_analyzed_after_a_fixed_number_of_changes():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'outbox'::regclass")
        options = dict(option.split("=") for option in cursor.fetchone()[0])
    assert options["autovacuum_vacuum_scale_factor"] == options["autovacuum_analyze_scale_factor"] == "0"
    assert int(options["autovacuum_vacuum_threshold"]) <= 10_000


def test_outbox__autovacuum_analyze_skips_the_payload_no_statement_reads_by():
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO outbox (event_id, run_id, event_type, payload_json)
            SELECT 'stats-' || i, 'stats-run-' || (i % 50), 'run.progress', jsonb_build_object('n', i)
            FROM generate_series(1, 200) AS i
        """)
        cursor.execute("ANALYZE outbox")
        cursor.execute("SELECT attname FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'outbox'")
        analyzed = {row[0] for row in cursor.fetchall()}
    assert "payload_json" not in analyzed
    assert {"run_id", "lane", "event_type", "created_at", "delivered_at"} <= analyzed
