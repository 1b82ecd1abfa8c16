"""SCH-1, SCH-2, SCH-4, SCH-5, SCH-6: migrations build, adopt, repeat and race safely."""

import importlib
import subprocess
import threading

import pytest

from tests.support import manage_command, manage_env, run_manage, PROJECT_DIR

pytestmark = pytest.mark.django_db


def _check(scratch_db, *args, **env):
    return run_manage("check_scheduler_schema", *args, database_url_value=scratch_db.url, **env)


@pytest.mark.requirement("SCH-1")
def test_fresh_database__migrate_then_check__ready(scratch_db):
    migrated = run_manage("migrate", "--no-input", database_url_value=scratch_db.url)
    assert migrated.returncode == 0, migrated.stderr
    checked = _check(scratch_db)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ready" in checked.stdout
    with scratch_db.connect() as conn:
        version = conn.execute("SELECT version FROM runtime_scheduler.scheduler_schema_migrations").fetchall()
    assert version == [(64,)]


@pytest.mark.requirement("SCH-2")
def test_fresh_database__v64_column_dropped__check_names_it_and_exclusion_passes(scratch_db):
    assert run_manage("migrate", "--no-input", database_url_value=scratch_db.url).returncode == 0
    with scratch_db.connect(autocommit=True) as conn:
        conn.execute("ALTER TABLE runtime_scheduler.runs DROP COLUMN array_input_started")
    missing = _check(scratch_db)
    assert missing.returncode == 1
    assert "runs.array_input_started" in missing.stdout
    excluded = _check(scratch_db, "--without", "array_input_intent")
    assert excluded.returncode == 0, excluded.stdout


def test_optional_legacy_index_missing__check_fails_unless_excluded(scratch_db):
    assert run_manage("migrate", "--no-input", database_url_value=scratch_db.url).returncode == 0
    with scratch_db.connect(autocommit=True) as conn:
        conn.execute("DROP INDEX runtime_scheduler.runtime_scheduler_sandbox_cleanup_legacy_pending_idx")
    assert "runtime_scheduler_sandbox_cleanup_legacy_pending_idx" in _check(scratch_db).stdout
    assert _check(scratch_db, "--without", "legacy_cleanup_pending_index").returncode == 0


def test_invalid_index__check_reports_it(scratch_db):
    assert run_manage("migrate", "--no-input", database_url_value=scratch_db.url).returncode == 0
    with scratch_db.connect(autocommit=True) as conn:
        conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
            "'runtime_scheduler.runtime_scheduler_outbox_pending_idx'::regclass"
        )
    checked = _check(scratch_db)
    assert checked.returncode == 1
    assert "invalid index runtime_scheduler_outbox_pending_idx" in checked.stdout


def _v63_tables():
    """The v63 DDL, as plain SQL an older deployment would have run."""
    return importlib.import_module("scheduler.migrations.0001_initial").V63_TABLES


@pytest.mark.requirement("SCH-2")
def test_adoption__v63_database_with_rows__migrate_keeps_rows_and_adds_column(scratch_db):
    with scratch_db.connect(autocommit=True) as conn:
        conn.execute("CREATE SCHEMA runtime_scheduler")
        conn.execute("SET search_path = runtime_scheduler")
        for statement in _v63_tables():
            conn.execute(statement)
        conn.execute(
            "INSERT INTO runs (run_id, play_name, status, launch_json) VALUES "
            "('run-old-1', 'play', 'completed', '{}'), ('run-old-2', 'play', 'queued', '{}')"
        )
        conn.execute("INSERT INTO attempts (run_id, attempt, status) VALUES ('run-old-1', 1, 'completed')")
        conn.execute(
            "INSERT INTO sandbox_cleanup_jobs (sandbox_id, run_id, attempt, environment, status) "
            "VALUES ('sb-1', 'run-old-1', 1, 'production', 'deleted')"
        )
    migrated = run_manage("migrate", "--no-input", database_url_value=scratch_db.url)
    assert migrated.returncode == 0, migrated.stderr
    with scratch_db.connect() as conn:
        runs = conn.execute(
            "SELECT run_id, status, array_input_started FROM runtime_scheduler.runs ORDER BY run_id"
        ).fetchall()
        attempts = conn.execute("SELECT count(*) FROM runtime_scheduler.attempts").fetchone()
        legacy = conn.execute("SELECT status FROM runtime_scheduler.sandbox_cleanup_jobs").fetchall()
    assert runs == [("run-old-1", "completed", False), ("run-old-2", "queued", False)]
    assert attempts == (1,)
    assert legacy == [("deleted",)]
    assert _check(scratch_db).returncode == 0


def test_migrate_twice__second_is_a_no_op(scratch_db):
    assert run_manage("migrate", "--no-input", database_url_value=scratch_db.url).returncode == 0
    again = run_manage("migrate", "--no-input", database_url_value=scratch_db.url)
    assert again.returncode == 0, again.stderr
    assert "No migrations to apply" in again.stdout


def test_two_migrate_processes_at_once__both_succeed(scratch_db):
    barrier = threading.Barrier(2)
    results = []

    def migrate():
        barrier.wait()
        results.append(
            subprocess.run(
                manage_command("migrate", "--no-input"),
                env=manage_env(scratch_db.url),
                cwd=PROJECT_DIR,
                capture_output=True,
                text=True,
                timeout=180,
            )
        )

    threads = [threading.Thread(target=migrate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [result.returncode for result in results] == [0, 0], [result.stderr for result in results]
    assert _check(scratch_db).returncode == 0


def test_concurrent_legacy_index__exists_and_valid_after_migrate():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT index_row.indisvalid, pg_get_indexdef(index_row.indexrelid) FROM pg_index AS index_row "
            "WHERE index_row.indexrelid = to_regclass('runtime_scheduler.runtime_scheduler_sandbox_cleanup_legacy_pending_idx')"
        )
        row = cursor.fetchone()
    assert row is not None
    valid, definition = row
    assert valid is True
    assert "WHERE (status <> 'deleted'::text)" in definition


def test_the_ledgers_event_id_has_no_pattern_index():
    """Stored events write one index entry fewer: nothing searches event ids by prefix (migration 0026)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'runtime_scheduler' "
                       "AND tablename = 'run_ledger_events' ORDER BY 1")
        names = [row[0] for row in cursor.fetchall()]
    assert names == ["run_ledger_events_pkey", "runtime_scheduler_run_ledger_events_run_idx"]


def test_models_and_migrations_agree():
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_other_schema_name__every_table_lives_there(scratch_db):
    migrated = run_manage("migrate", "--no-input", database_url_value=scratch_db.url, SCHEDULER_SCHEMA="tenant_sched")
    assert migrated.returncode == 0, migrated.stderr
    with scratch_db.connect() as conn:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'tenant_sched'"
            )
        }
        elsewhere = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema IN ('runtime_scheduler', 'public')"
        ).fetchone()[0]
    assert {"runs", "attempts", "outbox", "control", "runtime_release_admission", "receipts",
            "sandbox_cleanup_jobs", "sandbox_cleanup_jobs_v2", "sandbox_cleanup_events_v2",
            "compute_billing_jobs_v2", "billing_items", "scheduler_schema_migrations"} <= tables
    assert elsewhere == 0
    checked = run_manage("check_scheduler_schema", database_url_value=scratch_db.url, SCHEDULER_SCHEMA="tenant_sched")
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("bad_name", ["Runtime", "bad-name", "x;drop", "1abc", ""])
def test_invalid_schema_name__refused_at_start_up(scratch_db, bad_name):
    result = run_manage("check", database_url_value=scratch_db.url, SCHEDULER_SCHEMA=bad_name)
    assert result.returncode != 0
    assert "SCHEDULER_SCHEMA must be a plain lower-case identifier" in result.stderr


@pytest.mark.requirement("SCH-4")
def test_shape_check__a_wrong_type_a_lost_default_a_missing_constraint_and_function__each_named(scratch_db):
    """SCH-4: ready only when every column has its type, nullability and default, and every constraint and
    function exists; each drift is listed and the exit status is 1."""
    assert run_manage("migrate", "--no-input", database_url_value=scratch_db.url).returncode == 0
    with scratch_db.connect(autocommit=True) as conn:
        conn.execute("ALTER TABLE runtime_scheduler.runs ALTER COLUMN graph_hash TYPE varchar(64)")
        conn.execute("ALTER TABLE runtime_scheduler.runs ALTER COLUMN max_attempts DROP DEFAULT")
        conn.execute("ALTER TABLE runtime_scheduler.runs DROP CONSTRAINT runs_status_check")
        conn.execute("DROP FUNCTION runtime_scheduler.runtime_json_is_count(jsonb)")
    checked = _check(scratch_db)
    assert checked.returncode == 1
    for problem in ["wrong column runs.graph_hash", "wrong column runs.max_attempts",
                    "missing constraint runs_status_check on runs", "missing function runtime_json_is_count(value jsonb)"]:
        assert problem in checked.stdout, checked.stdout


@pytest.mark.requirement("SCH-6")
@pytest.mark.django_db(transaction=True)
def test_deploy_lock__holds_the_60_second_statement_timeout__and_leaves_none_behind():
    """SCH-6: schema init and expansion run with a 60 s statement timeout, set for the deploy only."""
    from django.db import connection

    from scheduler.schema.deploy import deploy_lock

    with deploy_lock():
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "1min"
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] != "1min"
