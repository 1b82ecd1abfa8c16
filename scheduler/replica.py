"""Reads off the primary (RET-5): with REPLICA_DATABASE_URL set, the reads that may lag (the admin's lists and
dashboard, the /metrics gauges, GET /internal/runs) run on a streaming replica; everything else stays on the primary.

A view opts in with `replica_reads()`; inside it the router (ORM reads) and scheduler.db (named statements) use the
replica alias. Writes never do: the router sends them to the primary, and a standby refuses them anyway. While
the replica cannot be reached, those reads use the primary, said in one log line, and the replica is tried
again after RETRY_SECONDS.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time

from django.db import DEFAULT_DB_ALIAS, connections

REPLICA_ALIAS = "replica"
RETRY_SECONDS = 30.0

logger = logging.getLogger("scheduler.replica")
# The alias reads use inside replica_reads(), decided once when the block opens; None outside any block.
_reading: contextvars.ContextVar[str | None] = contextvars.ContextVar("scheduler_replica_reads", default=None)
_state = threading.Lock()
_down_until = 0.0


def configured() -> bool:
    return REPLICA_ALIAS in connections.settings


@contextlib.contextmanager
def replica_reads():
    """Reads inside the block may come from the replica (a few seconds behind the primary at worst). Whether the
    replica answers is asked once, here, not before every statement of the block."""
    token = _reading.set(_reachable_alias())
    try:
        yield
    finally:
        _reading.reset(token)


def read_alias() -> str:
    """The alias a read uses: inside `replica_reads()` the one the block chose, else the primary."""
    return _reading.get() or DEFAULT_DB_ALIAS


def _reachable_alias() -> str:
    """The replica when it is configured and answers, else the primary (said once per RETRY_SECONDS)."""
    global _down_until
    if not configured() or time.monotonic() < _down_until:
        return DEFAULT_DB_ALIAS
    replica = connections[REPLICA_ALIAS]
    try:
        replica.ensure_connection()
        if not replica.is_usable():
            raise ConnectionError("the connection is not usable")
        return REPLICA_ALIAS
    except Exception as error:  # noqa: BLE001 - any failure to reach it means the primary answers, said once
        with contextlib.suppress(Exception):
            replica.close()
        with _state:
            first = time.monotonic() >= _down_until
            _down_until = time.monotonic() + RETRY_SECONDS
        if first:
            logger.warning("replica unreachable (%s); lagging reads use the primary for %.0f s",
                           type(error).__name__, RETRY_SECONDS)
        return DEFAULT_DB_ALIAS


class ReplicaRouter:
    """Django's database router: ORM reads inside `replica_reads()` go to the replica; nothing else does."""

    def db_for_read(self, model, **hints):
        return _reading.get()  # None outside replica_reads(): Django's default (the primary)

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_relation(self, first, second, **hints):
        return True  # the replica is a copy of the primary: its rows are the primary's rows

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db != REPLICA_ALIAS
