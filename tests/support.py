"""Helpers for tests that need their own database, connection or process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.db import connection

PROJECT_DIR = Path(__file__).resolve().parent.parent


def _server_params() -> dict:
    config = settings.DATABASES["default"]
    options = config.get("OPTIONS", {})
    host = options.get("host") or config.get("HOST") or ""
    return {"host": host, "port": str(config.get("PORT") or ""), "user": config.get("USER") or "", "password": config.get("PASSWORD") or ""}


def database_url(dbname: str) -> str:
    """A DATABASE_URL for `dbname` on the server the tests use."""
    params = _server_params()
    auth = quote(params["user"], safe="") + (":" + quote(params["password"], safe="") if params["password"] else "")
    if params["host"].startswith("/"):
        return f"postgresql://{auth}@/{dbname}?host={params['host']}"
    port = f":{params['port']}" if params["port"] else ""
    return f"postgresql://{auth}@{params['host'] or 'localhost'}{port}/{dbname}"


def current_database_url() -> str:
    return database_url(connection.settings_dict["NAME"])


def connect(dbname: str | None = None, application_name: str = "scheduler-tests", **kwargs) -> psycopg.Connection:
    """A raw psycopg connection of its own (for concurrency and DDL tests)."""
    params = _server_params()
    return psycopg.connect(
        host=params["host"] or None,
        port=params["port"] or None,
        user=params["user"] or None,
        password=params["password"] or None,
        dbname=dbname or connection.settings_dict["NAME"],
        application_name=application_name,
        **kwargs,
    )


class ScratchDatabase:
    """An empty database on the same server, dropped afterwards."""

    def __init__(self):
        self.name = f"scratch_{uuid.uuid4().hex[:12]}"
        self.url = database_url(self.name)

    def create(self):
        with connect("postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{self.name}"')
        return self

    def drop(self):
        with connect("postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def connect(self, **kwargs) -> psycopg.Connection:
        return connect(self.name, **kwargs)


def manage_env(database_url_value: str, **extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update({"DATABASE_URL": database_url_value, "LC_ALL": "C.UTF-8"})
    # The block-coverage guard's recorder (tests/plugins/sitecustomize.py) loads in the subprocess too.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_DIR / "tests" / "plugins"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def manage_command(*args: str) -> list[str]:
    return [sys.executable, str(PROJECT_DIR / "manage.py"), *args]


def run_manage(*args: str, database_url_value: str, timeout: float = 120, **extra_env) -> subprocess.CompletedProcess:
    """Run `manage.py args` as a subprocess against `database_url_value`."""
    return subprocess.run(
        manage_command(*args),
        env=manage_env(database_url_value, **extra_env),
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    """A TCP port on loopback nobody listens on now (for a server the test starts)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, what: str, seconds: float = 60):
    """Poll `predicate` until it is truthy (never a timing assertion: the deadline only bounds a hang)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def prepared_text(name: str) -> tuple[str, tuple[str, ...]]:
    """Block `name` as PREPARE takes it (`$n` placeholders) and its parameter order, rendered from the catalogue
    without scheduler.db: a planning test parses or EXPLAINs a block, it does not run it, so the block-coverage guard
    must not count it."""
    import re

    from scheduler import sql
    from scheduler.conf import scheduler_settings

    names: list[str] = []

    def number(match):
        if match.group(0) == "%%":
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s|%%", number, sql.statement(name, scheduler_settings.schema)), tuple(names)


def generic_plan(name: str, params: dict | None = None, *, analyze: bool = False) -> str:
    """EXPLAIN named block `name` as a prepared statement running its generic plan: for `params`, else with every
    parameter NULL (a generic plan is the same for any values). Inside a transaction of its own (a savepoint in a
    test's), which also bounds the plan mode."""
    from django.db import transaction

    from scheduler import db

    text, names = prepared_text(name)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE plan_check AS {text}")
        if params is None:
            cursor.execute("SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = 'plan_check'")
            arguments, values = None, ", ".join(f"NULL::{kind}" for kind in cursor.fetchone()[0])
        else:
            arguments, values = db._arguments(name, names, params), ", ".join(["%s"] * len(names))
        cursor.execute(f"EXPLAIN {'(ANALYZE, BUFFERS, COSTS OFF) ' if analyze else ''}EXECUTE plan_check({values})",
                       arguments)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE plan_check")
    return plan


@contextlib.contextmanager
def logged_plans(*, analyze: bool = False):
    """The plans of the statements run on Django's connection inside the block, as auto_explain sends them to this
    client (with `analyze`, with actual rows): what the scheduler's own calls were planned as."""
    connection.ensure_connection()
    raw, plans = connection.connection, []

    def keep(notice):
        plans.append(notice.message_primary or "")

    raw.add_notice_handler(keep)
    raw.execute("LOAD 'auto_explain'")
    raw.execute("SELECT set_config('auto_explain.log_min_duration', '0', false),"
                " set_config('auto_explain.log_analyze', %s, false), set_config('client_min_messages', 'log', false)",
                ["on" if analyze else "off"])
    try:
        yield plans
    finally:
        raw.execute("SELECT set_config('auto_explain.log_min_duration', '-1', false),"
                    " set_config('client_min_messages', 'notice', false)")
        raw.remove_notice_handler(keep)
