"""Schema deploys that two processes may run at once (SCH-6).

`migrate` runs inside `deploy_lock()`: it waits for a session advisory lock
keyed by the schema, creates the schema, and sets the 60 s statement
timeout. The lock is polled rather than awaited in the server, because a
waiter blocked inside a statement would hold a snapshot that a concurrent
CREATE INDEX CONCURRENTLY (run by the lock holder) must wait out.
"""

from __future__ import annotations

import contextlib
import time

from django.db import connections

from scheduler import db
from scheduler.conf import scheduler_settings

DEPLOY_STATEMENT_TIMEOUT = "60s"
POLL_SECONDS = 0.2


@contextlib.contextmanager
def deploy_lock(using: str = "default", wait_seconds: float = 600.0):
    schema = scheduler_settings.schema
    connection = connections[using]
    deadline = time.monotonic() + wait_seconds
    while not db.fetch_value("schema_deploy_try_lock", {"schema": schema}, using=using):
        if time.monotonic() > deadline:
            raise TimeoutError(f"another deploy of schema {schema} held the deploy lock for {wait_seconds:.0f}s")
        time.sleep(POLL_SECONDS)
    try:
        db.run("schema_set_deploy_timeouts", {"statement_timeout": DEPLOY_STATEMENT_TIMEOUT}, using=using)
        db.run("schema_create", using=using)
        yield
    finally:
        if connection.connection is not None and not connection.in_atomic_block:
            try:
                db.run("schema_deploy_unlock", {"schema": schema}, using=using)
            finally:
                # The session timeout was a deploy setting; do not leak it to reuse.
                connection.close()
