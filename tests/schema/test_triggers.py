"""The invariants the database holds itself refuse their forbidden writes."""

import pytest
from django.db import IntegrityError, connection, transaction

pytestmark = pytest.mark.django_db


def _exec(sql, params=None):
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


def _refused(sql, match):
    with pytest.raises(IntegrityError, match=match):
        with transaction.atomic():
            _exec(sql)


@pytest.fixture
def finished_run():
    _exec(
        "INSERT INTO runs (run_id, play_name, status) VALUES ('run-t', 'play', 'completed');"
        "INSERT INTO attempts (run_id, attempt, status, runner_result_json) "
        "VALUES ('run-t', 1, 'completed', '{\"status\": \"completed\"}')"
    )


@pytest.mark.parametrize("status", ["queued", "running", "failed"])
def test_terminal_run__status_change__refused(finished_run, status):
    _refused(f"UPDATE runs SET status = '{status}' WHERE run_id = 'run-t'", "run run-t is completed .terminal. and cannot change status")


def test_terminal_run__other_columns__still_writable(finished_run):
    _exec("UPDATE runs SET runtime_resources_json = '[{\"billingEndedAt\": 1}]' WHERE run_id = 'run-t'")


def test_finished_attempt__status_change__refused(finished_run):
    _refused("UPDATE attempts SET status = 'running' WHERE run_id = 'run-t'", "cannot change its status or result")


def test_finished_attempt__result_change__refused(finished_run):
    _refused(
        "UPDATE attempts SET runner_result_json = '{\"status\": \"failed\"}' WHERE run_id = 'run-t'",
        "cannot change its status or result",
    )


def test_cleanup_events__update_and_delete__refused():
    _exec(
        "INSERT INTO sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, event_type) "
        "VALUES ('ev-1', 'daytona', 'sb', 'run', 1, 'provider_delete_accepted')"
    )
    _refused("UPDATE sandbox_cleanup_events_v2 SET event_type = 'x'", "append-only: UPDATE")
    _refused("DELETE FROM sandbox_cleanup_events_v2", "append-only: DELETE")


@pytest.mark.parametrize("table,extra_cols,extra_vals", [
    ("sandbox_cleanup_jobs", "", ""),
    ("sandbox_cleanup_jobs_v2", ", provider", ", 'daytona'"),
])
def test_deleted_cleanup_row__back_to_pending_or_removed__refused(table, extra_cols, extra_vals):
    _exec(
        f"INSERT INTO {table} (sandbox_id, run_id, attempt, environment, status{extra_cols}) "
        f"VALUES ('sb-1', 'run', 1, 'production', 'deleted'{extra_vals})"
    )
    _refused(f"UPDATE {table} SET status = 'pending'", "is deleted and cannot return to pending")
    _refused(f"DELETE FROM {table}", "is a deletion record and cannot be removed")


def test_pending_cleanup_row__can_be_deleted_status():
    _exec("INSERT INTO sandbox_cleanup_jobs (sandbox_id, run_id, attempt, environment) VALUES ('sb-2', 'r', 1, 'p')")
    _exec("UPDATE sandbox_cleanup_jobs SET status = 'deleted' WHERE sandbox_id = 'sb-2'")


def test_a_refused_update__leaves_the_row_as_it_was(finished_run):
    _refused("UPDATE runs SET status = 'queued', play_name = 'other' WHERE run_id = 'run-t'", "cannot change status")
    with connection.cursor() as cursor:
        cursor.execute("SELECT status, play_name FROM runs WHERE run_id = 'run-t'")
        assert cursor.fetchone() == ("completed", "play")


GUARDED_UPDATES = {"runs": "terminal_run_status_frozen", "attempts": "finished_attempt_frozen",
                   "receipts": "completed_receipt_frozen", "sandbox_cleanup_jobs_v2": "tombstone_stays_deleted",
                   "sandbox_cleanup_jobs": "tombstone_stays_deleted"}


def test_update_guards_run_after_the_write__so_an_update_takes_no_extra_row_lock():
    """A BEFORE row trigger on UPDATE locks each row before its WHEN is read: a tuple lock and a WAL record on every
    heartbeat, park and settlement. The guards are AFTER triggers (bit 2 of tgtype is BEFORE)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgrelid::regclass::text, tgname, tgtype & 2 = 2 FROM pg_trigger "
                       "WHERE NOT tgisinternal AND tgname LIKE ANY (%s)",
                       [[f"pgtrigger_{name}_%" for name in GUARDED_UPDATES.values()]])
        timing = {(table.split(".")[-1], name.rsplit("_", 1)[0].removeprefix("pgtrigger_")): before
                  for table, name, before in cursor.fetchall()}
    assert timing == {(table, name): False for table, name in GUARDED_UPDATES.items()}
