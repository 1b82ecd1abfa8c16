"""Running behind a transaction-pooling bouncer (PgBouncer `pool_mode = transaction`).

Why: such a pooler hands each transaction to whichever server connection is
free, so nothing may live in a session: no startup options (PgBouncer refuses
`options`), no session SET, no session advisory lock, no LISTEN. The
scheduler's statements carry their settings per transaction (scheduler/db.py);
what every pooled session needs before its first statement (search_path,
statement_timeout, plan_cache_mode) becomes the role's default in the
database, set by `migrate` over DIRECT_DATABASE_URL; LISTEN and the deploy
lock connect there too. A pooled connection whose search_path does not start
with the scheduler schema is refused at once: its ORM queries would otherwise
miss every table.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from scheduler import db
from scheduler.conf import scheduler_settings


def set_role_defaults(using: str) -> list[str]:
    """Make this role's sessions in this database start as the scheduler's startup options would; the settings."""
    rows = db.fetch_all("schema_pooled_role_defaults", {
        "schema": scheduler_settings.schema,
        "statement_timeout": f"{scheduler_settings.statement_timeout_ms}ms",
        "plan_cache_mode": scheduler_settings.plan_cache_mode,
    }, using=using)
    with connections[using].cursor() as cursor:
        for row in rows:
            cursor.execute(row["statement"])
    return [row["statement"].split(" SET ", 1)[1] for row in rows]


def check_pooled_session(sender, connection, **kwargs) -> None:
    """On every new pooled connection: refuse one that would not find the scheduler's tables (one clear line,
    no URL)."""
    if connection.vendor != "postgresql" or connection.connection is None or not db.pooled(connection):
        return
    with connection.connection.cursor() as cursor:
        cursor.execute(db.statement_sql("schema_session_search_path"))
        first_schema, search_path = cursor.fetchone()
    if first_schema != scheduler_settings.schema:
        raise ImproperlyConfigured(
            f"SCHEDULER_TRANSACTION_POOLING: pooled sessions have search_path {search_path!r}, which does not "
            f"start with {scheduler_settings.schema}; run `manage.py migrate` (it sets the role's defaults over "
            "DIRECT_DATABASE_URL) or ALTER ROLE ... IN DATABASE ... SET search_path for the pooler's role")
