"""The statement runner: bound parameters, dict rows, psycopg errors surfaced; the claim's own timeouts."""

import psycopg
import pytest

from scheduler import db
from tests import factories
from tests.support import connect, logged_plans

pytestmark = pytest.mark.django_db(transaction=True)


def test_rows_are_dicts_with_json_decoded():
    run_id = factories.launch(input={"a": [1, 2]})
    row = db.fetch_one("runs_read_status", {"run_id": run_id, "default_max_active": None})
    assert row["run_id"] == run_id and row["attempts"] == []


def test_database_error__surfaces_as_psycopg_error_with_statement_name():
    with pytest.raises(psycopg.errors.CheckViolation) as raised:
        db.fetch_one("runs_launch", {
            "release_keys": [], "run_ids": ["r1"], "org_ids": [None], "play_names": ["p"], "graph_hashes": [None],
            "runtime_profiles": [None], "definition_scopes": ["galaxy"], "launches": ["{}"], "inputs": [None],
            "run_log_stores": [None], "max_attempts": [1], "wait_deadlines": [None], "idempotency_keys": [None],
            "idempotency_digests": [None], "priorities": [0], "concurrency_keys": [None],
            "concurrency_limits": [None], "run_afters": [None],
        })
    assert "in SQL statement runs_launch" in raised.value.__notes__


@pytest.mark.requirement("OBX-5")
def test_claim_timeouts__a_claim_behind_a_stuck_lock_gives_up__then_claims_once_it_is_gone():
    """OBX-5: the claim's transaction sets a lock timeout, so a drainer never waits behind a stuck lock."""
    from scheduler.outbox import drainer

    run_id = factories.launch()
    with connect(autocommit=False) as holder:
        holder.execute("SELECT 1 FROM runtime_scheduler.outbox WHERE run_id = %s FOR UPDATE", [run_id])
        with pytest.raises(psycopg.errors.LockNotAvailable):
            drainer.run_once("behind-a-stuck-lock")
        holder.rollback()
    assert drainer.run_once("behind-a-stuck-lock").counts["delivered"] == 1


def test_generic_plan_mark__the_statement_never_replans_and_others_keep_the_configured_mode():
    from django.db import connection

    from scheduler.runs import settlement

    for _ in range(7):
        claim = factories.parked_run()
        settlement.settle_attempt(claim.run_id, claim.attempt, claim.lease_token, factories.completed_result())
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                       " WHERE statement LIKE %s", ["%AS item(run_id, attempt, lease_token, result,%"])
        assert cursor.fetchall() == [(7, 0)]
    db.fetch_one("runs_read_status", {"run_id": claim.run_id, "default_max_active": None})
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('plan_cache_mode')")
        assert cursor.fetchone()[0] == "auto"


def custom_listing() -> list[dict]:
    """The drainers' listing in its `plan: custom` form (what a look runs while the outbox outgrows its statistics)."""
    from scheduler.kinds import Lane

    return db.fetch_all("outbox_list_ready_runs", {
        "lane": Lane.LEDGER, "admission_first": True, "limit": 8, "exclude_run_ids": [],
        "enumerate_terminals": False, "walk_terminals": False, "enumerate_waits": False, "walk_waits": False})


def assert_listing_planned_with_its_values() -> None:
    """The drainers' listing (`plan: custom`), run now on Django's connection, is planned with its lane's value."""
    with logged_plans() as plans:
        custom_listing()
    conditions = [line.strip() for plan in plans for line in plan.splitlines() if "Index Cond: (lane = " in line]
    assert conditions and all("'ledger'::text" in line for line in conditions), "\n".join(plans)


def test_custom_plan_mark__planned_with_its_values_even_after_a_generic_statement():
    """A `generic` block leaves the session in force_generic_plan; the drainer's listing (`plan: custom`) run next
    on that connection must still be planned with its values, not as the generic plan its SQL warns about."""
    from scheduler.runs import lifecycle

    factories.launch()
    lifecycle.claim_queued_runs(1)  # runs_claim_queued: plan: generic
    assert_listing_planned_with_its_values()


def test_custom_plan_mark__parsed_once_per_connection__planned_with_its_values_on_every_call():
    """A `custom` block is prepared (parsed once) and run under force_custom_plan, so every call is planned with its
    values and none with a generic plan; a block after it runs under the configured mode again."""
    from django.db import connection

    run_id = factories.launch()
    for _ in range(7):
        custom_listing()
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%WITH candidate_runs AS%"])
        assert cursor.fetchall() == [(0, 7)]
    assert_listing_planned_with_its_values()
    db.fetch_one("runs_read_status", {"run_id": run_id, "default_max_active": None})
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('plan_cache_mode')")
        assert cursor.fetchone()[0] == "auto"


def test_any_plan_mark__runs_in_the_mode_its_connection_is_in__without_a_switch():
    """Issue 47: a dispatcher arms its wake signal between generic claims and a drainer between its listings; the
    arm (`plan: any`, an upsert by primary key) switched the session to the configured mode and the next claim or
    listing switched it back, a set_config each way. It is prepared, and leaves the mode as it found it."""
    from django.db import connection

    from scheduler.kinds import Lane
    from scheduler.runs import lifecycle

    def mode():
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('plan_cache_mode')")
            return cursor.fetchone()[0]

    factories.launch()
    lifecycle.claim_queued_runs(1)  # runs_claim_queued_free: plan: generic
    db.execute("wake_signals_arm", {"channel": "run_queued"})
    assert mode() == "force_generic_plan"
    db.fetch_one("outbox_survey_lane", {"lane": Lane.LEDGER, "bound": 256, "admission_first": True})  # custom
    db.execute("wake_signals_arm", {"channel": "outbox_wake"})
    assert mode() == "force_custom_plan"
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%wake_signals AS wake%"])
        assert cursor.fetchone()[0] == 1


def test_cleanup_sweep__its_preflight_runs_in_the_claims_mode__an_idle_tick_switches_nothing():
    """Issue 47: each sweep tick runs the adoption preflight, then its generic claim; the preflight, which has no
    parameter, ran in the configured mode, so an idle tick was four statements: two of them mode switches."""
    from django.db import connection

    from scheduler.cleanup import obligations, sandbox_sweep

    sandbox_sweep.run_once(["daytona"], "cleaner-test")  # ends with sandbox_cleanup_claim: plan: generic
    assert obligations.adoption_pending() is False
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('plan_cache_mode')")
        assert cursor.fetchone()[0] == "force_generic_plan"


def test_custom_plan_mark__a_switch_that_failed_with_its_statement_is_made_again():
    """The switch back travels in one pipeline with the custom block; when the block fails, the switch rolls back
    with it, so the runner must not believe it made: the next custom block switches again."""
    from scheduler.runs import lifecycle

    factories.launch()
    lifecycle.claim_queued_runs(1)  # runs_claim_queued: plan: generic
    with pytest.raises(psycopg.errors.InvalidRowCountInLimitClause):
        db.fetch_all("attempts_list_expired_claims", {"limit": -1, "now": None})  # plan: custom, fails
    assert_listing_planned_with_its_values()


def test_a_connection_the_server_closed__the_next_tick_reconnects():
    from django.db import close_old_connections, connection

    run_id = factories.launch()
    with connect(autocommit=True) as killer:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            killer.execute("SELECT pg_terminate_backend(%s)", [cursor.fetchone()[0]])
    close_old_connections()  # what every request and loop tick does first
    assert db.fetch_one("runs_read_status", {"run_id": run_id, "default_max_active": None})["run_id"] == run_id


def test_refresh_connections__a_connection_proven_within_a_second_skips_the_health_check_round_trip():
    import time

    from django.db import connection

    connection.ensure_connection()
    connection.health_check_done = True
    db.refresh_connections(time.monotonic())  # a tick that just succeeded: no SELECT 1 before the next statement
    assert connection.health_check_done and connection.connection is not None
    db.refresh_connections(time.monotonic() - db.HEALTHY_FOR_SECONDS - 1)  # a quiet second: Django's check again
    assert not connection.health_check_done


def test_refresh_connections__still_honours_max_age_and_errors():
    import time

    from django.db import connection

    connection.ensure_connection()
    connection.health_check_done, connection.errors_occurred = True, True
    db.refresh_connections(time.monotonic())  # an error since: Django's path (checks the connection, keeps it)
    assert not connection.errors_occurred and connection.connection is not None
    close_at, connection.close_at = connection.close_at, time.monotonic() - 1
    try:
        db.refresh_connections(time.monotonic())
        assert connection.connection is None  # past CONN_MAX_AGE: closed even when just proven
    finally:
        connection.close_at = close_at


def test_generic_plan_marks__a_drainers_claim_runs_generic_plans_and_switches_the_mode_twice_a_tick(monkeypatch):
    """Issue 47: after its custom listing a drainer locked, read, leased and acknowledged under the configured mode,
    which planned each of them again on every call (0.28 ms a lock of 5 runs) and the catalog's column check between
    them switched the mode once more each way. Marked generic (and the check `any`), a tick switched the session
    twice: to the listing's custom mode and back to generic for the claim. Now, while the outbox's statistics fit
    it, the survey and the listing run their generic forms too: the first tick (its survey planned per call, no
    survey having said so yet) switches twice, and every later one none."""
    from django.db import connection

    from scheduler.outbox import claims, drainer
    from tests.outbox.factories import backlog_run
    from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver

    switches = []
    switch = db._switch_plan_mode

    def counted(cursor, wanted):
        made = switch(cursor, wanted)
        if made is not None:
            switches.append(made)
        return made

    monkeypatch.setattr(db, "_switch_plan_mode", counted)
    monkeypatch.setattr(claims._Statistics, "fit", False)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE outbox")  # statistics that describe it, whatever earlier tests left on disk
    receiver = FakeReceiver()
    try:
        launch = {"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN}
        for tick in range(6):  # past the configured mode's five custom plans, which a generic mark never makes
            backlog_run(f"run-plan-{tick}", facts=3, launch=launch)
            switches.clear()
            assert drainer.run_once("test-drainer").counts["delivered"] == 3
            assert switches == (["force_custom_plan", "force_generic_plan"] if tick == 0 else []), (tick, switches)
    finally:
        receiver.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, custom_plans, generic_plans FROM pg_prepared_statements")
        claim_plans = [(custom, generic) for statement, custom, generic in cursor.fetchall()
                       if "FOR NO KEY UPDATE SKIP LOCKED" in statement or "SET delivered_at" in statement]
    assert claim_plans and all(custom == 0 and generic > 0 for custom, generic in claim_plans), claim_plans


@pytest.mark.requirement("RET-3")
def test_custom_plan_mark__a_block_that_writes__sent_unprepared_in_the_configured_mode():
    """A block's triggers and foreign keys run statements of their own in the session's mode: under
    force_custom_plan each was planned again on every row, and pruning 500 runs spent 44 ms of its commit on the
    deferred foreign-key checks (9 ms in the configured mode), halving the prune's rate."""
    from django.db import connection

    from scheduler import sql
    from scheduler.history import pruning
    from scheduler.kinds import Lane

    assert sql.writes("retention_prune_runs") and sql.writes("retention_prune_billing_items")
    assert not sql.writes("outbox_list_ready_runs") and not sql.writes("retention_held")
    db.fetch_one("outbox_survey_lane", {"lane": Lane.LEDGER, "bound": 256, "admission_first": True})  # reads: custom
    pruning.run_once(batch=10)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('plan_cache_mode')")
        assert cursor.fetchone()[0] == "auto"
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%DELETE FROM%"])
        assert cursor.fetchone()[0] == 0


def test_a_threads_statements_share_one_cursor_per_connection_and_a_new_connection_gets_its_own():
    """The kept cursor (db_cursor.py) serves every statement of the connection it was made on; once Django opens
    another connection (a restart, a failover), the next statement runs on a cursor of that one, not the old."""
    from django.db import connection

    from scheduler import db_cursor

    db.fetch_value("sandbox_cleanup_adoption_preflight")
    first = db_cursor.raw_cursor("default", connection.connection)
    assert db.fetch_value("sandbox_cleanup_adoption_preflight") is False
    assert db_cursor.raw_cursor("default", connection.connection) is first
    connection.close()
    assert db.fetch_value("sandbox_cleanup_adoption_preflight") is False
    second = db_cursor.raw_cursor("default", connection.connection)
    assert second is not first and second.connection is connection.connection and first.connection.closed
