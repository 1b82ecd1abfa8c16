"""SWP-1 at the cost of what is stale: attempts.liveness_deadline, set by park, moved by a heartbeat only when half a
timeout or less remains, found by index; older writers (NULL or outdated deadlines) and a schema without the column
are tolerated."""

import datetime as dt
import json

import pytest
from django.db import connection

from scheduler.runs import beats, liveness
from tests import factories
from tests.factories import heartbeat_at, one, query
from tests.support import generic_plan

pytestmark = pytest.mark.django_db
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)


def deadline_of(run_id):
    return one("SELECT liveness_deadline FROM attempts WHERE run_id = %s", [run_id])


def inspected(now=LATER):
    return sorted(row["run_id"] for row in liveness.discover(100, 60_000, None, now) if row["work"] == "inspect")


def hot_updates():
    """Heap-only (HOT) updates of attempts in this test's transaction: updates that wrote no index entry."""
    return one("SELECT pg_stat_get_xact_tuples_hot_updated('attempts'::regclass)")


def attempt_page(run_id: str) -> int:
    return one("SELECT (ctid::text::point)[0]::int FROM attempts WHERE run_id = %s AND attempt = 1", [run_id])


def test_park_sets_the_deadline__a_heartbeat_keeps_it_while_half_a_timeout_remains__without_index_entries():
    parked = factories.parked_run(heartbeat_timeout_ms=30_000)
    started = one("SELECT (suspension_json ->> 'startedAtMs')::bigint FROM runs WHERE run_id = %s", [parked.run_id])
    parked_deadline = dt.datetime.fromtimestamp(started / 1000 + 30, dt.UTC)
    assert deadline_of(parked.run_id) == parked_deadline
    before, page = hot_updates(), attempt_page(parked.run_id)
    beats.heartbeat(parked.run_id, 1, parked.lease_token)
    assert deadline_of(parked.run_id) == parked_deadline
    # HOT when no indexed column changed and the new version found room on its page (a page left full by
    # earlier tests' rows sends it elsewhere, which says nothing about the columns).
    assert hot_updates() == before + (attempt_page(parked.run_id) == page)


def test_a_heartbeat_moves_the_deadline__when_less_than_half_a_timeout_remains_or_it_lies_past_the_beats_own():
    parked = factories.parked_run(heartbeat_timeout_ms=30_000)
    for kept in ("10 seconds", "1 hour"):
        query(f"UPDATE attempts SET liveness_deadline = now() + interval '{kept}' WHERE run_id = %s", [parked.run_id])
        beats.heartbeat(parked.run_id, 1, parked.lease_token)
        assert deadline_of(parked.run_id) == heartbeat_at(parked.run_id) + dt.timedelta(seconds=30)


def test_a_kept_deadline__never_judges_a_runner_early_and_never_misses_it():
    parked = factories.parked_run(heartbeat_timeout_ms=30_000)
    beats.heartbeat(parked.run_id, 1, parked.lease_token)
    kept, overdue = deadline_of(parked.run_id), heartbeat_at(parked.run_id) + dt.timedelta(seconds=30)
    assert kept < overdue
    # Past the kept deadline, the index finds the runner; the recheck with heartbeat_at keeps it alive.
    assert inspected(kept + (overdue - kept) / 2) == []
    assert inspected(overdue + dt.timedelta(milliseconds=1)) == [parked.run_id]


def test_older_writers__a_null_or_outdated_deadline_is_rechecked_never_missed():
    stale, fresh, unkept = (factories.parked_run(heartbeat_timeout_ms=1000) for _ in range(3))
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 hour', liveness_deadline = NULL WHERE run_id = %s",
          [stale.run_id])
    # An older heartbeat writer moved heartbeat_at but not the deadline: the candidate is rechecked, not judged.
    query("UPDATE attempts SET heartbeat_at = %s, liveness_deadline = now() - interval '1 hour' WHERE run_id = %s",
          [LATER, fresh.run_id])
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 hour', liveness_deadline = NULL WHERE run_id = %s",
          [unkept.run_id])
    assert inspected() == sorted([stale.run_id, unkept.run_id])


def test_an_idle_tick_probes_the_deadline_index():
    for _ in range(3):
        factories.parked_run(heartbeat_timeout_ms=600_000)
    query("ANALYZE attempts")
    params = {"limit": 100, "default_timeout_ms": 60_000, "after_run_ids": json.dumps({}), "now": None,
              "providers": ["daytona", "modal", "local"], "fallback_provider": "daytona"}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a tiny test table would be read whole anyway
    plan = generic_plan("runs_list_liveness_work", params)
    assert "runtime_scheduler_attempts_liveness_deadline_idx" in plan, plan
    assert "runtime_scheduler_attempts_recorded_unsettled_idx" in plan, plan


def test_reader_first__discovery_on_a_schema_without_the_column():
    parked = factories.parked_run(heartbeat_timeout_ms=1000)
    query("UPDATE attempts SET heartbeat_at = now() - interval '1 hour' WHERE run_id = %s", [parked.run_id])
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute("ALTER TABLE attempts DROP COLUMN liveness_deadline CASCADE")
    assert inspected() == [parked.run_id]
