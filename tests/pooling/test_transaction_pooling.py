"""Behind a transaction-pooling PgBouncer: no session state leaks, and the whole service works through it."""

import re
import signal
import subprocess
import threading

import pytest
from django.db import connection

from scheduler import db
from scheduler.runs import settlement
from tests import factories
from tests.pooling.bouncer import Bouncer, pgbouncer_binary
from tests.support import PROJECT_DIR, free_port, manage_command, manage_env, run_manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _session_plan_mode() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('plan_cache_mode')")
        return cursor.fetchone()[0]


def test_pooled__a_generic_statement_sets_its_plan_mode_for_its_own_transaction_only(settings):
    settings.SCHEDULER_TRANSACTION_POOLING = True
    for _ in range(6):
        claim = factories.parked_run()
        settlement.settle_attempt(claim.run_id, claim.attempt, claim.lease_token, factories.completed_result())
    # The statement still ran its generic plan, and the session (a pooled server connection) kept its own mode.
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%AS item(run_id, attempt, lease_token, result,%"])
        assert cursor.fetchall() == [(6, 0)]
    assert _session_plan_mode() == "auto"


def test_pooled__inside_a_callers_transaction_the_rest_of_it_runs_in_the_configured_mode(settings):
    from django.db import transaction

    settings.SCHEDULER_TRANSACTION_POOLING = True
    claim = factories.parked_run()
    with transaction.atomic():
        settlement.settle_attempt(claim.run_id, claim.attempt, claim.lease_token, factories.completed_result())
        assert _session_plan_mode() == "auto"
    assert _session_plan_mode() == "auto"


def test_unpooled__the_session_switch_is_kept(settings):
    """The direct connection is ours alone: one switch per change, not one per statement."""
    claim = factories.parked_run()
    settlement.settle_attempt(claim.run_id, claim.attempt, claim.lease_token, factories.completed_result())
    assert _session_plan_mode() == "force_generic_plan"
    db.fetch_one("runs_read_status", {"run_id": claim.run_id, "default_max_active": None})
    assert _session_plan_mode() == "auto"


def test_pooled__no_startup_options_and_no_server_side_cursors(scratch_db):
    shown = run_manage("shell", "-c", "from django.conf import settings; d = settings.DATABASES['default']; "
                       "print(d['OPTIONS'].get('options'), d.get('DISABLE_SERVER_SIDE_CURSORS'))",
                       database_url_value=scratch_db.url, DIRECT_DATABASE_URL=scratch_db.url,
                       SCHEDULER_TRANSACTION_POOLING="true")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1].split() == ["None", "True"]


def test_pooled_without_direct_url__refused_in_one_line(scratch_db):
    result = run_manage("check", database_url_value=scratch_db.url, SCHEDULER_TRANSACTION_POOLING="true")
    assert result.returncode != 0
    assert "SCHEDULER_TRANSACTION_POOLING=true needs DIRECT_DATABASE_URL" in result.stderr


def _bouncer_or_skip() -> None:
    if pgbouncer_binary() is None:
        pytest.skip("Debian's pgbouncer is not installed (.ci/run installs it)")


def test_the_service_through_pgbouncer_in_transaction_mode(scratch_db, tmp_path):
    """migrate, the web server and every worker loop through a 4-connection transaction pool; the three demo runs
    (one through a runner killed mid-play and retried, one waiting for an event with its sandbox released) complete
    and their facts are delivered."""
    _bouncer_or_skip()
    bouncer = Bouncer(scratch_db.name)
    env = manage_env(bouncer.url, DIRECT_DATABASE_URL=scratch_db.url, SCHEDULER_TRANSACTION_POOLING="true",
                     SCHEDULER_PREPARE_STATEMENTS="false", SCHEDULER_SANDBOX_DIR=str(tmp_path / "sandboxes"))
    try:
        # Over DIRECT_DATABASE_URL: the pooler is not even up yet. Role defaults reach only sessions opened later.
        migrated = subprocess.run(manage_command("migrate"), env=env, cwd=PROJECT_DIR, capture_output=True,
                                  text=True, timeout=300)
        assert migrated.returncode == 0, migrated.stderr
        assert "Pooled sessions of this role start with search_path" in migrated.stdout
        bouncer.start()
        lines = _scheduler_up(env)
        delivered = [line for line in lines if re.search(r"demo run \S+: \d+ facts delivered", line)]
        assert len(delivered) == 3, lines
        assert any("the retry skipped reserve-stock" in line for line in lines), lines
        assert any("waiting for the event approved with its sandbox released" in line for line in lines), lines
    finally:
        log = bouncer.stop()
    assert "unsupported startup parameter" not in log, log
    with scratch_db.connect(autocommit=True) as conn:
        statuses = conn.execute("SELECT status, count(*) FROM runtime_scheduler.runs GROUP BY 1").fetchall()
        undelivered = conn.execute("SELECT count(*) FROM runtime_scheduler.outbox WHERE delivered_at IS NULL")
        assert statuses == [("completed", 3)] and undelivered.fetchone()[0] == 0


def _scheduler_up(env: dict) -> list[str]:
    """Run scheduler_up until the demo runs' facts are delivered; its output lines."""
    port = free_port()
    process = subprocess.Popen(manage_command("scheduler_up", "--bind", f"127.0.0.1:{port}"), env=env,
                               cwd=PROJECT_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(lambda: process.poll() is not None
                 or sum("facts delivered" in line for line in lines) >= 3, "the demo runs delivered", seconds=180)
        assert process.poll() is None, "".join(lines)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
        reader.join(timeout=10)
        process.stdout.close()
    return lines
