"""OBX-6 lease expiry after SIGKILL; SCH-3 delivery on a schema without runs.array_input_started."""

import signal
import subprocess
import threading
import time

import pytest

from scheduler.outbox import drainer
from tests.factories import one
from tests.outbox.factories import backlog_run
from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver
from tests.support import PROJECT_DIR, connect, current_database_url, manage_command, manage_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.requirement("OBX-6")
def test_drainer_killed_mid_delivery__lease_expires_and_another_delivers():
    receiver = FakeReceiver()
    receiver.hold = threading.Event()
    try:
        ids = backlog_run("run-k", facts=5, launch={"runtimeApiBaseUrl": receiver.url,
                                                     "coordinatorInternalToken": COORDINATOR_TOKEN})
        process = subprocess.Popen(manage_command("drain_outbox", "--lease-seconds", "1", "--interval", "0.1"),
                                   cwd=PROJECT_DIR, env=manage_env(current_database_url()),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while one("SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL") != 5:
            assert time.monotonic() < deadline, "the drainer never leased the prefix"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        receiver.hold.set()
        assert receiver.first_sightings("run-k") == []
        while one("SELECT bool_and(lease_expires_at <= now()) FROM outbox WHERE run_id = 'run-k'") is not True:
            assert time.monotonic() < deadline, "the lease never expired"
            time.sleep(0.05)
        assert drainer.run_once("survivor").counts["delivered"] == 5
        assert receiver.first_sightings("run-k") == ids
    finally:
        receiver.hold.set()
        receiver.close()


@pytest.mark.requirement("OBX-9")
def test_drainer_sigterm__returns_its_leases_and_exits_0():
    """OBX-9."""
    receiver = FakeReceiver()
    receiver.hold = threading.Event()
    try:
        backlog_run("run-t", facts=3, launch={"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN})
        backlog_run("run-u", facts=3, launch={"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN},
                    start_second=5)
        process = subprocess.Popen(manage_command("drain_outbox", "--workers", "2", "--interval", "0.1"),
                                   cwd=PROJECT_DIR, env=manage_env(current_database_url()),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while one("SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL") == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        receiver.hold.set()
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
        assert one("SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL AND delivered_at IS NULL") == 0
    finally:
        receiver.hold.set()
        receiver.close()


def test_historical_schema__column_dropped__terminal_delivered__column_back__next_claim_reads_it():
    refused_launch = {"runtimeApiBaseUrl": None}  # staged intent with no projection origin would be refused
    try:
        with connect(autocommit=True) as admin:
            admin.execute("ALTER TABLE runtime_scheduler.runs DROP COLUMN array_input_started")
        backlog_run_without_intent("run-h1")
        result = drainer.run_once("owner")
        assert result.counts["delivered"] == 1 and result.counts["retried"] == 0
    finally:
        with connect(autocommit=True) as admin:
            admin.execute("ALTER TABLE runtime_scheduler.runs ADD COLUMN IF NOT EXISTS array_input_started "
                          "boolean NOT NULL DEFAULT false")
    backlog_run("run-h2", kinds=["run.completed"], array_input_started=True, launch=refused_launch, start_second=9)
    result = drainer.run_once("owner")
    assert result.counts["retried"] == 1  # the intent was read again: staged input, no receiver
    assert "Staged array input" in one("SELECT last_error FROM outbox WHERE run_id = 'run-h2'")


def backlog_run_without_intent(run_id):
    from tests.factories import query

    query("INSERT INTO runs (run_id, org_id, play_name, status, launch_json) VALUES (%s, 'o', 'p', 'completed', '{}')", [run_id])
    query("INSERT INTO outbox (event_id, run_id, event_type, payload_json) VALUES (%s, %s, 'run.completed', '{}')",
          [f"{run_id}:done", run_id])


@pytest.mark.requirement("SCH-3")
def test_column_dropped_between_the_catalog_read_and_the_select__retried_once_without_it():
    """SCH-3: the catalog says the column is there (its drop is not committed yet), the select then waits for the
    table and meets 42703 once the drop commits: the reader retries once on the path without the column. The
    outbox's claim and this reader share that retry (scheduler/schema/optional_columns.py)."""
    from scheduler.runs import reads
    from tests.concurrency import threads
    from tests.factories import query

    query("INSERT INTO runs (run_id, org_id, play_name, status, launch_json, array_input_started) "
          "VALUES ('run-race', 'o', 'p', 'completed', '{}', true)")
    assert reads.terminal_array_input_intent("run-race") == reads.ArrayInputIntent("p", True)
    try:
        with connect(autocommit=False) as admin:
            admin.execute("ALTER TABLE runtime_scheduler.runs DROP COLUMN array_input_started")
            reader, read = threads.start(lambda: reads.terminal_array_input_intent("run-race"),
                                         application_name="intent-reader")
            threads.wait_until_blocked("intent-reader")
            admin.commit()
        reader.join(30)
        assert read.get() == reads.ArrayInputIntent(None, False)
    finally:
        with connect(autocommit=True) as admin:
            admin.execute("ALTER TABLE runtime_scheduler.runs ADD COLUMN IF NOT EXISTS array_input_started "
                          "boolean NOT NULL DEFAULT false")
