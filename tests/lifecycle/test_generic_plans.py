"""Statements marked `-- plan: generic` run one plan for every parameter: it must stay on indexes."""

import pytest
from django.db import connection

from scheduler import sql as sql_blocks
from tests.support import generic_plan

pytestmark = pytest.mark.django_db

BIG_TABLES = ("runs", "attempts", "outbox", "sandbox_cleanup_jobs_v2", "compute_billing_jobs_v2")


@pytest.fixture
def sizeable_tables():
    """Enough rows that a sequential scan would be the planner's honest choice for an unselective plan."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
            SELECT 'plan-' || i, 'org', 'p', CASE WHEN i % 2 = 0 THEN 'queued' ELSE 'completed' END, '{}', 1,
                   now() + i * interval '1 microsecond'
            FROM generate_series(1, 20000) AS i;
            INSERT INTO attempts (run_id, attempt, status, lease_token)
            SELECT 'plan-' || i, 1, 'completed', 'lease-' || i FROM generate_series(1, 20000, 2) AS i;
            INSERT INTO outbox (event_id, run_id, event_type, payload_json)
            SELECT 'plan-' || i || ':run.created', 'plan-' || i, 'run.created', '{}' FROM generate_series(1, 20000) AS i;
            -- Cleanup and billing keep their finished jobs (tombstones), so most rows are history.
            INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, status)
            SELECT 'daytona', 'sandbox-' || i, 'plan-' || i, 1, 'production',
                   CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'deleted' END
            FROM generate_series(1, 20000) AS i;
            INSERT INTO compute_billing_jobs_v2 (run_id, status)
            SELECT 'plan-' || i, CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'finalized' END FROM generate_series(1, 20000) AS i;
            ANALYZE runs; ANALYZE attempts; ANALYZE outbox; ANALYZE sandbox_cleanup_jobs_v2; ANALYZE compute_billing_jobs_v2;
        """)


@pytest.mark.parametrize("name", sorted(name for name in sql_blocks.raw_blocks() if sql_blocks.plan_mark(name) == "generic"))
def test_generic_plan__no_sequential_scan_of_a_scheduler_table(sizeable_tables, name):
    plan = generic_plan(name)
    scans = [line.strip() for line in plan.splitlines() if "Seq Scan on" in line]
    assert not [scan for scan in scans if any(f"Seq Scan on {table} " in scan for table in BIG_TABLES)], plan


def test_generic_plan__the_cleanup_claim_walks_the_due_index_in_order_and_stops_at_its_limit(sizeable_tables):
    """Its lock sits right on the due index's ordered scan: no sort of every due job underneath it."""
    lines = [line.strip() for line in generic_plan("sandbox_cleanup_claim").splitlines()]
    locks = [number for number, line in enumerate(lines) if line.startswith("->  LockRows")]
    assert locks and all("Index Scan using runtime_scheduler_cleanup_v2_due_idx" in lines[number + 1]
                         for number in locks), "\n".join(lines)


@pytest.mark.requirement("SWP-1")
def test_generic_plan__liveness_discovery_reads_only_expired_or_undated_parked_attempts(sizeable_tables):
    """SWP-1: each way into the liveness index is a range (an index condition), never a walk of every parked
    attempt filtered one by one (12 ms per idle tick at 100,000 parked runs with terminal history)."""
    lines = [line.strip() for line in generic_plan("runs_list_liveness_work").splitlines()]
    scans = [number for number, line in enumerate(lines) if "attempts_liveness_deadline_idx" in line]
    assert len(scans) == 2, "\n".join(lines)
    assert all(lines[number].startswith("->  Index Scan") and lines[number + 1].startswith("Index Cond: (liveness_deadline")
               for number in scans), "\n".join(lines)
    assert not [line for line in lines if line.startswith(("Filter:", "Recheck Cond:")) and "liveness_deadline" in line]


@pytest.fixture
def due_backlog():
    """A backlog due at once beside a long history (the deleted jobs' events too: an empty, vacuumed event log,
    which earlier tests can leave, makes a scan of it cost nothing): the statistics under which a generic plan,
    guessing a tenth of the due jobs for an unknown limit, hashed the whole table to find the jobs its claim had
    just locked. Every billing job's run is there as well: a runs table that earlier tests left empty and analyzed
    costs nothing to scan (one CI run had those statistics), which no database holding this backlog's runs says."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, finished_at)
            SELECT 'billed-' || i, 'org', 'p', 'completed', '{}', 1, now() - interval '1 minute'
            FROM generate_series(1, 120000) AS i;
            INSERT INTO compute_billing_jobs_v2 (run_id, status, available_at)
            SELECT 'billed-' || i, CASE WHEN i <= 100000 THEN 'finalized' ELSE 'pending' END,
                   now() - interval '1 minute' + i * interval '1 millisecond'
            FROM generate_series(1, 120000) AS i;
            INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, status, available_at)
            SELECT 'daytona', 'sandbox-' || i, 'run-' || i, 1, 'production',
                   CASE WHEN i <= 20000 THEN 'deleted' ELSE 'pending' END,
                   now() - interval '1 minute' + i * interval '1 millisecond'
            FROM generate_series(1, 120000) AS i;
            INSERT INTO sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, event_type)
            SELECT 'event-' || i || '-' || kind, 'daytona', 'sandbox-' || i, 'run-' || i, 1, kind
            FROM generate_series(1, 20000) AS i,
                 unnest(ARRAY['provider_delete_accepted', 'provider_delete_confirmed']) AS kind;
            ANALYZE runs; ANALYZE compute_billing_jobs_v2; ANALYZE sandbox_cleanup_jobs_v2;
            ANALYZE sandbox_cleanup_events_v2;
        """)


# Nodes that read what the statement already holds (its CTEs' few rows), not a table.
TUPLE_SOURCES = ("CTE Scan", "Function Scan", "WorkTable Scan", "Values Scan", "Subquery Scan")


def hash_joined_tables(plan: str) -> list[str]:
    """The scans of a table on either side of a Hash Join: a hash join with a table reads all of it. A hash join
    of CTE rows (the jobs just locked, their runs) joins what the statement already holds, and is left alone."""
    lines, found = plan.splitlines(), []
    for number, line in enumerate(lines):
        if "Hash Join" not in line:
            continue
        depth = len(line) - len(line.lstrip())
        for child in lines[number + 1:]:
            if len(child) - len(child.lstrip()) <= depth:
                break
            if " Scan " in child and " on " in child and not any(kind in child for kind in TUPLE_SOURCES):
                found.append(child.strip())
    return found


@pytest.mark.parametrize("name", ["compute_billing_finalize_due", "sandbox_cleanup_claim"])
def test_generic_plan__a_claim_finds_what_it_locked_by_key_however_large_the_backlog(due_backlog, name):
    plan = generic_plan(name)
    assert "Seq Scan on" not in plan and not hash_joined_tables(plan), plan


@pytest.mark.requirement("RUN-10")
def test_generic_plan__unacknowledged_cancels_are_read_from_the_open_cancels_alone(sizeable_tables):
    """RUN-10: old cancels of ended runs and the parked runs themselves are never walked; each open cancel's
    run and attempt are found by key."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO control (key, value_json)
            SELECT 'runtime_cancel:plan-' || i, jsonb_build_object('runEndedAt', 1) FROM generate_series(1, 20000) AS i;
            ANALYZE control;
        """)
    plan = generic_plan("runs_list_unacknowledged_cancels")
    assert "Index Scan using runtime_scheduler_control_open_cancels_idx" in plan, plan
    assert "Seq Scan on control" not in plan and "Hash Join" not in plan, plan
