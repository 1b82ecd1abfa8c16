"""Debian's PgBouncer in transaction mode, in front of one database of the test server, for one test."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.support import _server_params, free_port


def _run_as() -> str | None:
    """PgBouncer refuses root: as root it runs as the owner of the server's socket directory (it must reach it)."""
    if os.geteuid() != 0:
        return None
    host = _server_params()["host"]
    if host.startswith("/"):
        return pwd.getpwuid(Path(host).stat().st_uid).pw_name
    return "nobody"


def pgbouncer_binary() -> str | None:
    """Debian's pgbouncer (in /usr/sbin, which a non-root PATH may lack), or None when it is not installed."""
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    return found if Path(found).exists() else None


class Bouncer:
    """Started with `pool_mode = transaction` and a small pool, so clients really share server connections."""

    def __init__(self, dbname: str, pool_size: int = 4):
        self.binary = pgbouncer_binary()
        self.port = free_port()
        self.dbname = dbname
        self.directory = Path(tempfile.mkdtemp(prefix="bouncer-"))
        params = _server_params()
        server = f"host={params['host'] or '127.0.0.1'}" + (f" port={params['port']}" if params["port"] else "")
        server += f" dbname={dbname} user={params['user'] or 'postgres'}"
        if params["password"]:
            server += f" password={params['password']}"
        (self.directory / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{dbname} = {server}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            "auth_type = any\npool_mode = transaction\n"
            f"default_pool_size = {pool_size}\nmax_client_conn = 200\n"
            # psycopg and the test's own clients send these; the scheduler sends no `options` when pooled.
            "ignore_startup_parameters = extra_float_digits\n"
            "server_reset_query =\nlog_connections = 0\nlog_disconnections = 0\n"
        )
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"postgresql://pooled@127.0.0.1:{self.port}/{self.dbname}"

    def start(self) -> "Bouncer":
        user = _run_as()
        if user is not None:
            shutil.chown(self.directory, user)
            for path in self.directory.iterdir():
                shutil.chown(path, user)
        argv = [self.binary, *(["-u", user] if user else []), str(self.directory / "pgbouncer.ini")]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"pgbouncer exited: {self.process.communicate()[0]}")
            try:
                with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return self
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise AssertionError("pgbouncer never accepted a connection")

    def stop(self) -> str:
        """Stop it; what it logged."""
        output = ""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            output = self.process.communicate(timeout=30)[0]
        shutil.rmtree(self.directory, ignore_errors=True)
        return output
