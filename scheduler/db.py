"""Run a named SQL statement: bound parameters, dict rows, per-statement timeout.

Why: every atomic state change is one statement kept in scheduler/sql/; this
is the only way code reaches them. Statements run on Django's connection
(same session, same transaction) through a server-side-binding psycopg
cursor and are prepared per connection: the CTE statements cost more to plan
than to execute. SCHEDULER_PREPARE_STATEMENTS=false turns preparing off (for
a transaction-pooling bouncer older than PgBouncer 1.21). Database errors come out as psycopg's own
exceptions (with `.sqlstate`), with the statement name added as a note, so
callers can match SQLSTATEs such as 42703 without Django's wrapper.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import time
import weakref
from typing import Any

import psycopg
from django.db import close_old_connections, connections, transaction

from scheduler import replica, sql
from scheduler.db_cursor import dict_rows, raw_cursor
from scheduler.conf import scheduler_settings


def statement_sql(name: str, schema: str | None = None) -> str:
    return sql.statement(name, schema or scheduler_settings.schema)


_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@functools.cache
def _compiled(name: str, schema: str) -> tuple[str, tuple[str, ...]]:
    """The block with `%(name)s` turned into `$n` once, and the parameter order.

    psycopg only caches its own conversion for short queries; the CTE
    statements are longer, so they are converted here, once.
    """
    names: list[str] = []

    def number(match):
        if match.group(0) == "%%":
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _PLACEHOLDER.sub(number, statement_sql(name, schema)), tuple(names)


def _arguments(name: str, names: tuple[str, ...], params: dict[str, Any]) -> list[Any]:
    missing = [key for key in names if key not in params]
    if missing:
        raise KeyError(f"SQL statement {name} needs parameter(s) {', '.join(missing)}")
    return [params[key] for key in names]


# The plan_cache_mode each open connection was last switched to (absent: the configured one).
_plan_modes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _switch_plan_mode(cursor, wanted: str | None) -> str | None:
    """The session plan_cache_mode to switch to before the next statement; None when it is already `wanted`."""
    if wanted is None or _plan_modes.get(cursor.connection, scheduler_settings.plan_cache_mode) == wanted:
        return None
    return wanted


def _plan(name: str, behind_pooler: bool) -> tuple[bool, str | None]:
    """(whether block `name` is prepared, the plan_cache_mode it runs under; None: the session's, left as it is).

    A `custom` block is planned on every call with that call's values. On a direct connection a block that only
    reads is prepared and run under force_custom_plan: parsed once per connection, where an unprepared statement is
    parsed and analyzed on every call too (the drainers' listing spent 0.79 ms of server CPU a call unprepared, 0.58
    prepared). A block that writes is sent unprepared in the configured mode instead: its triggers' and foreign
    keys' own statements run in the session's mode, and force_custom_plan planned each of them again on every row
    (pruning 500 runs spent 44 ms of its commit on deferred foreign-key checks, 9 ms in the configured mode).
    Behind a transaction pooler a mode of its own would cost the block a transaction of its own, so it is sent
    unprepared there, which plans it with its values unless the mode forces generic plans. An `any` block runs in
    whatever mode its connection is in: its plan is the same either way, and a switch is a statement of its own.
    """
    if not scheduler_settings.prepare_statements:
        return False, None
    configured = scheduler_settings.plan_cache_mode
    mark = sql.plan_mark(name)
    if mark == "any":
        return True, None
    if mark == "custom":
        if not behind_pooler and not sql.writes(name):
            return True, "force_custom_plan"
        return False, configured if configured != "force_generic_plan" else "force_custom_plan"
    return True, "force_generic_plan" if mark == "generic" else configured


def _execute(cursor, name: str, text: str, arguments: list[Any], *, prepare: bool, session_mode: str | None,
             local_mode: str | None, reset_mode: bool) -> tuple[list[dict[str, Any]], int]:
    try:
        if local_mode is not None:
            cursor.execute("SELECT set_config('plan_cache_mode', $1, true)", [local_mode])
        switch = _switch_plan_mode(cursor, session_mode)
        # A session switch travels in one pipeline with the statement: no round trip of its own.
        with cursor.connection.pipeline() if switch else contextlib.nullcontext():
            if switch:
                cursor.execute("SELECT set_config('plan_cache_mode', $1, false)", [switch])
            cursor.execute(text, arguments, prepare=prepare)
        if switch:
            # Recorded once the statement succeeded: a failure may have rolled the switch back with it, and a
            # mode believed switched that is not would plan the next custom block generically.
            _plan_modes[cursor.connection] = switch
        rows = dict_rows(cursor)
        rowcount = cursor.rowcount
        if reset_mode:
            # Inside the caller's transaction: the rest of it runs under the configured mode again.
            cursor.execute("SELECT set_config('plan_cache_mode', $1, true)", [scheduler_settings.plan_cache_mode])
        return rows, rowcount
    except psycopg.Error as exc:
        exc.add_note(f"in SQL statement {name}")
        raise


def run(
    name: str,
    params: dict[str, Any] | None = None,
    *,
    using: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Execute block `name`; return (rows as dicts, rowcount).

    A statement that needs a timeout sets it with its own block (set_config(..., true), pooler-safe), as the
    outbox claim does. Behind a transaction pooler
    (SCHEDULER_TRANSACTION_POOLING) a statement's own plan_cache_mode is set
    for its transaction only: a session setting would stay on a server
    connection the pooler hands to other clients.
    """
    text, names = _compiled(name, scheduler_settings.schema)
    arguments = _arguments(name, names, params or {})
    using = using or replica.read_alias()  # the primary, unless inside replica_reads() with a replica that answers
    connection = connections[using]
    # What Django's own cursors do first: once per request or loop tick, drop a
    # connection the server has closed (CONN_HEALTH_CHECKS), then (re)connect.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    # Behind a pooler a statement's own mode lasts its transaction; a direct connection keeps a session switch.
    behind_pooler = pooled(connection)
    prepare, mode = _plan(name, behind_pooler)
    local_mode = mode if behind_pooler and mode != scheduler_settings.plan_cache_mode else None
    session_mode = None if behind_pooler else mode
    reset_mode = local_mode is not None and connection.in_atomic_block
    own_transaction = local_mode is not None
    with transaction.atomic(using=using, savepoint=False) if own_transaction else contextlib.nullcontext():
        cursor = raw_cursor(using, connection.connection)
        try:
            return _execute(cursor, name, text, arguments, prepare=prepare,
                            session_mode=session_mode, local_mode=local_mode, reset_mode=reset_mode)
        except psycopg.Error as error:
            # As Django's error wrapper would: the end of the request or tick
            # then checks the connection and closes it if it is broken.
            connection.errors_occurred = True
            if error.sqlstate in MOVED_PRIMARY_STATES:
                # HA-1: this server is, or became, a standby (a demoted primary): it still answers, so nothing
                # would close the connection; closed at the end of the request or tick instead, the next one goes
                # (target_session_attrs=read-write) to whichever server is the primary now.
                connection.close_at = 0.0
            raise


# HA-1: what a server answers a write it will not take because it is in recovery (read_only_sql_transaction).
MOVED_PRIMARY_STATES = frozenset({"25006"})


def drop_moved_connections() -> None:
    """HA-1: close now each connection a read-only refusal marked (outside a transaction), so the next statement,
    this request's retry or the next request, connects to the primary; the API calls it when it answers 503."""
    for connection in connections.all(initialized_only=True):
        if connection.close_at == 0.0 and not connection.in_atomic_block:
            connection.close()

# The alias DIRECT_DATABASE_URL configures (config/settings.py): a session of its own, past any pooler.
DIRECT_ALIAS = "direct"


def pooled(connection) -> bool:
    """Whether Django `connection` reaches the database through a transaction pooler (no session state).

    With SCHEDULER_TRANSACTION_POOLING every alias but the direct one does (the settings refuse pooling without
    DIRECT_DATABASE_URL).
    """
    return bool(scheduler_settings.transaction_pooling) and connection.alias != DIRECT_ALIAS


def direct_alias() -> str:
    """The database alias for what needs a session of its own: LISTEN, the deploy lock, `migrate`.

    DIRECT_DATABASE_URL names it when DATABASE_URL reaches a pooler; otherwise it is the default connection.
    """
    from django.conf import settings

    return DIRECT_ALIAS if DIRECT_ALIAS in settings.DATABASES else "default"


def json_param(value: Any) -> str | None:
    """A value for a `::jsonb` parameter: its JSON text, or NULL for None."""
    return None if value is None else json.dumps(value)


def fetch_all(name: str, params: dict[str, Any] | None = None, **kwargs) -> list[dict[str, Any]]:
    return run(name, params, **kwargs)[0]


def fetch_one(name: str, params: dict[str, Any] | None = None, **kwargs) -> dict[str, Any] | None:
    rows = run(name, params, **kwargs)[0]
    return rows[0] if rows else None


def fetch_value(name: str, params: dict[str, Any] | None = None, **kwargs) -> Any:
    row = fetch_one(name, params, **kwargs)
    return None if row is None else next(iter(row.values()))


def execute(name: str, params: dict[str, Any] | None = None, **kwargs) -> int:
    return run(name, params, **kwargs)[1]


def keep_values_out_of_server_log(sender, connection, **kwargs) -> None:
    """On every new connection: a failed statement's text and context (which may quote a launch's tokens) stay out
    of the server log, where the server lets this role say so.

    Both settings need a superuser or `GRANT SET ON PARAMETER` (PostgreSQL 15+); without that the server keeps
    its own settings, and values are still refused at the edge before any statement sees them.
    """
    if connection.vendor != "postgresql" or connection.connection is None or pooled(connection):
        return  # behind a pooler a session setting would stay on a server connection other clients get
    raw = connection.connection
    try:
        raw.execute("SELECT set_config('log_error_verbosity', 'terse', false), "
                    "set_config('log_min_error_statement', 'panic', false)")
    except psycopg.errors.InsufficientPrivilege:
        if not raw.autocommit:
            raw.rollback()


# A connection that answered a statement this recently is not health-checked again before the next one.
HEALTHY_FOR_SECONDS = 1.0


def refresh_connections(proven_at: float) -> None:
    """Before a loop's tick or a batch: Django's close_old_connections, unless the caller's last tick or batch
    (at `proven_at`) succeeded within the last second.

    Why: with CONN_HEALTH_CHECKS that function makes each connection's next statement a SELECT 1 round trip
    first, on the critical path of every tick and batch (a busy dispatcher ticks hundreds of times a second). A
    connection that just answered is alive; one that broke since fails its statement, which the caller handles
    (a loop logs the failed tick and reconnects, a batcher retries item by item). CONN_MAX_AGE and a connection
    that saw an error still get what close_old_connections gives them.
    """
    current = [connection for connection in connections.all(initialized_only=True) if connection.connection]
    if time.monotonic() - proven_at > HEALTHY_FOR_SECONDS or any(c.errors_occurred for c in current):
        close_old_connections()
        return
    for connection in current:
        if connection.close_at is not None and time.monotonic() >= connection.close_at:
            connection.close()
