"""A real pg_auto_failover formation on loopback (HA-2): a monitor and two data nodes of Debian's
postgresql-15-auto-failover, the second a synchronous standby of the first.

A node is its `pg_autoctl` process tree (keeper, Postgres supervisor, postmaster, backends); killing the tree with
SIGKILL is losing the machine. The monitor's health checks are tightened (a second instead of five, an unhealthy node
after three seconds instead of twenty) so a failover takes seconds, not a minute. pg_autoctl refuses to run as root:
as root, every command runs as the `postgres` user, in a folder that user owns.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import psycopg

from tests.support import free_port, wait_for

PG_BIN = Path("/usr/lib/postgresql/15/bin")
DATABASE = "scheduler"
# The monitor's settings that decide how fast a lost primary is replaced (pg_auto_failover's defaults in brackets).
FAST_FAILOVER = {"health_check_period": 1000, "health_check_timeout": 1000, "health_check_max_retries": 1,  # [5000, 5000, 2]
                 "health_check_retry_delay": 500, "node_considered_unhealthy_timeout": 3000,  # [2000, 20000]
                 "primary_demote_timeout": 3000}  # [30000]
WRITABLE = ("primary", "wait_primary", "single")


def available() -> bool:
    return shutil.which("pg_autoctl") is not None and (PG_BIN / "pg_ctl").exists()


class Formation:
    def __init__(self, *, synchronous: bool = True):
        self.root = Path(tempfile.mkdtemp(prefix="formation-", dir="/tmp"))
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o700)
        self.ports = {"monitor": free_port(), "node1": free_port(), "node2": free_port()}
        self.nodes: dict[str, subprocess.Popen] = {}
        self.log = self.root / "formation.log"
        self._create_monitor()
        for name in ("node1", "node2"):
            self._create_node(name)
            self.wait_for(lambda: self._node_ready(name), f"{name} registered and running", 120)
        self.wait_for(lambda: self.states() == {"node1": "primary", "node2": "secondary"}, "node1 primary, node2 its standby", 120)
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        if not synchronous:
            self._autoctl("set", "node", "replication-quorum", "false", "--pgdata", str(self.root / "node2"))
            self.wait_for(lambda: self.primary_setting("synchronous_standby_names") == "", "asynchronous replication")

    # -- processes ---------------------------------------------------------------------------------------------

    def _command(self, *args: str) -> list[str]:
        command = ["pg_autoctl", *args]
        return ["runuser", "-u", "postgres", "--", *command] if self.as_root else command

    def _env(self) -> dict:
        env = dict(os.environ, PG_CONFIG=str(PG_BIN / "pg_config"), PATH=f"{PG_BIN}:{os.environ['PATH']}",
                   XDG_DATA_HOME=str(self.root / "data"), XDG_CONFIG_HOME=str(self.root / "config"),
                   XDG_RUNTIME_DIR=str(self.root / "run"))
        env.pop("PGPASSWORD", None)
        return env

    def _autoctl(self, *args: str) -> None:
        with open(self.log, "a") as log:
            subprocess.run(self._command(*args), env=self._env(), cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
                           check=True, timeout=180)

    def _spawn(self, *args: str) -> subprocess.Popen:
        with open(self.log, "a") as log:
            return subprocess.Popen(self._command(*args), env=self._env(), cwd=self.root, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _create_monitor(self) -> None:
        self._autoctl("create", "monitor", "--pgdata", str(self.root / "monitor"), "--pgport", str(self.ports["monitor"]),
                      "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", str(PG_BIN / "pg_ctl"))
        self.monitor = self._spawn("run", "--pgdata", str(self.root / "monitor"))
        self.wait_for(lambda: self._answers(self.ports["monitor"], "pg_auto_failover"), "the monitor answering", 60)
        with psycopg.connect(self._url(self.ports["monitor"], "pg_auto_failover"), autocommit=True) as conn:
            for setting, value in FAST_FAILOVER.items():
                conn.execute(f"ALTER SYSTEM SET pgautofailover.{setting} = {int(value)}")
            conn.execute("SELECT pg_reload_conf()")

    def _create_node(self, name: str) -> None:
        monitor = self._url(self.ports["monitor"], "pg_auto_failover", user="autoctl_node") + "?sslmode=disable"
        self.nodes[name] = self._spawn(
            "create", "postgres", "--pgdata", str(self.root / name), "--pgport", str(self.ports[name]),
            "--hostname", "127.0.0.1", "--name", name, "--auth", "trust", "--no-ssl", "--monitor", monitor,
            "--pgctl", str(PG_BIN / "pg_ctl"), "--run")

    def kill(self, name: str) -> float:
        """SIGKILL the node's whole process tree (the machine is lost); answers when, as time.monotonic()."""
        root = psutil.Process(self.nodes[name].pid)
        tree = [root, *root.children(recursive=True)]
        killed_at = time.monotonic()
        for process in tree:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(tree, timeout=30)
        self.nodes[name].wait(timeout=30)  # reaped: its Popen is replaced when the node rejoins
        return killed_at

    def rejoin(self, name: str) -> None:
        """Start a lost node again: its keeper asks the monitor, which demotes it to a standby of the new primary."""
        self.nodes[name] = self._spawn("run", "--pgdata", str(self.root / name))

    def stop(self) -> None:
        for process in [*self.nodes.values(), self.monitor]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.nodes.values(), self.monitor]:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                for child in psutil.Process(process.pid).children(recursive=True):
                    child.kill()
                process.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- reading it ------------------------------------------------------------------------------------------

    @staticmethod
    def _url(port: int, dbname: str, user: str = "postgres") -> str:
        return f"postgres://{user}@127.0.0.1:{port}/{dbname}"

    def _answers(self, port: int, dbname: str) -> bool:
        try:
            with psycopg.connect(self._url(port, dbname), connect_timeout=2):
                return True
        except psycopg.Error:
            return False

    def _node_ready(self, name: str) -> bool:
        return self.states().get(name) in ("primary", "secondary", "single", "wait_primary")

    def conninfo(self, dbname: str = DATABASE) -> str:
        """What DATABASE_URL names: both nodes, the one that takes writes chosen at each connection (HA-1)."""
        return (f"postgres://postgres@127.0.0.1:{self.ports['node1']},127.0.0.1:{self.ports['node2']}/{dbname}"
                "?target_session_attrs=read-write&connect_timeout=2")

    @property
    def url(self) -> str:
        return self.conninfo()

    def states(self) -> dict[str, str]:
        """Each node's state as the monitor has it, where what the node reported is what it was assigned; else
        the two, `reported->assigned`."""
        try:
            with psycopg.connect(self._url(self.ports["monitor"], "pg_auto_failover"), connect_timeout=2) as conn:
                rows = conn.execute("SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node").fetchall()
        except psycopg.Error:
            return {}
        return {name: reported if reported == assigned else f"{reported}->{assigned}" for name, reported, assigned in rows}

    def primary(self) -> str | None:
        return next((name for name, state in self.states().items() if state in WRITABLE), None)

    def primary_setting(self, name: str) -> str | None:
        try:
            with psycopg.connect(self.conninfo("postgres")) as conn:
                return conn.execute(f"SHOW {name}").fetchone()[0]
        except psycopg.Error:
            return None

    def query(self, sql: str, params=None) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql, params or []).fetchall()

    wait_for = staticmethod(wait_for)
