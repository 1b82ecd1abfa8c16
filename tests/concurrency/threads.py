"""Run callables on their own threads and connections, released together by a barrier."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from django.db import connection, connections


class Outcome:
    def __init__(self):
        self.value: Any = None
        self.error: BaseException | None = None

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


def _worker(fn: Callable, outcome: Outcome, barrier: threading.Barrier | None, application_name: str | None):
    try:
        connection.ensure_connection()
        if application_name:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('application_name', %s, false)", [application_name])
        if barrier is not None:
            barrier.wait()
        outcome.value = fn()
    except BaseException as exc:  # noqa: BLE001 - handed back to the test
        outcome.error = exc
    finally:
        connections.close_all()


def start(fn: Callable, *, barrier: threading.Barrier | None = None, application_name: str | None = None):
    outcome = Outcome()
    thread = threading.Thread(target=_worker, args=(fn, outcome, barrier, application_name), daemon=True)
    thread.start()
    return thread, outcome


def run_together(*fns: Callable) -> list[Outcome]:
    barrier = threading.Barrier(len(fns))
    started = [start(fn, barrier=barrier) for fn in fns]
    for thread, _ in started:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a concurrent call never finished"
    return [outcome for _, outcome in started]


def wait_until_blocked(application_name: str, timeout: float = 30.0) -> None:
    """Wait until the backend tagged `application_name` waits on a lock (no fixed sleeps)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                [application_name],
            )
            if cursor.fetchone()[0]:
                return
        time.sleep(0.01)
    raise AssertionError(f"{application_name} never blocked on a lock")


def wait_for(predicate: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll `predicate` until it holds (no fixed sleeps); fail naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def array_statement_blocked() -> bool:
    """Whether an array-driven group statement (a settle, a park) waits on a row lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity"
                       " WHERE wait_event_type = 'Lock' AND query LIKE %s", ["%unnest(%"])
        return cursor.fetchone()[0] > 0


def queue_behind_a_held_run(batcher, held_run_id: str, first_item, items: list,
                            table: str = "runs") -> tuple[Outcome, list[Outcome]]:
    """Block `batcher` (a runs/batcher.py StatementBatcher) on `first_item`, whose run's row in `table` is held (the
    row its statement locks: a heartbeat's is its attempt's); queue `items` from their own threads together, then
    let go: the items share the batcher's next statement."""
    from tests.support import connect

    with connect(autocommit=False) as holder:
        holder.execute(f"SELECT 1 FROM runtime_scheduler.{table} WHERE run_id = %s FOR UPDATE", [held_run_id])
        first = start(lambda: batcher.submit(first_item))
        wait_for(array_statement_blocked, "the batcher waits on the held run")
        barrier = threading.Barrier(len(items))
        started = [start(lambda item=item: batcher.submit(item), barrier=barrier) for item in items]
        wait_for(lambda: batcher._queue.qsize() == len(items), "every item is queued")
        holder.rollback()
    for thread, _ in [first, *started]:
        thread.join(timeout=60)
        assert not thread.is_alive()
    return first[1], [outcome for _, outcome in started]
