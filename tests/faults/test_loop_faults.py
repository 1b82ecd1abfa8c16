"""The worker loop survives a failed tick, goes again when its batch was full, and ends only on bad configuration."""

import logging
import threading

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured

from scheduler import db
from scheduler.faults import describe
from scheduler.loop import Loop
from scheduler.tick import Tick

# The loop recycles and drops real connections between ticks.
pytestmark = pytest.mark.django_db(transaction=True)


def _loop(tick, **kwargs):
    return Loop("test", tick, interval=60, logger=logging.getLogger("test.loop"), **kwargs)


def test_a_failed_tick__logged_in_one_line__the_loop_goes_on(caplog):
    ticks, done = [], threading.Event()
    loop = _loop(lambda: None)

    def tick():
        ticks.append(len(ticks))
        if len(ticks) == 1:
            raise psycopg.OperationalError("server closed the connection unexpectedly\nThis probably means ...")
        loop.stopping.set()
        done.set()
        return {"claimed": 1}

    loop.tick = tick
    with caplog.at_level(logging.WARNING, logger="test.loop"):
        assert loop.run() == 0
    assert done.is_set() and ticks == [0, 1]
    failures = [record.getMessage() for record in caplog.records if "tick failed" in record.getMessage()]
    assert failures == ["test tick failed (1 in a row): psycopg.OperationalError: server closed the connection unexpectedly"]
    assert loop.faults_in_a_row == 0  # reset by the good tick


def test_a_failed_once_tick__gives_up_with_a_non_zero_code():
    def tick():
        raise RuntimeError("provider answered nonsense")

    assert _loop(tick, once=True).run() == 1


def test_a_configuration_error__ends_the_loop():
    def tick():
        raise ImproperlyConfigured("SCHEDULER_DAYTONA_API_KEYS must map organization ids to non-empty key strings")

    with pytest.raises(ImproperlyConfigured):
        _loop(tick).run()


def test_a_full_batch__the_next_tick_runs_at_once():
    """interval=60: without `again` the second tick would wait a minute, and the test would hang."""
    ticks = []
    loop = _loop(lambda: None)

    def tick():
        ticks.append(1)
        if len(ticks) == 3:
            loop.stopping.set()
        return Tick({"claimed": 10}, again=True)

    loop.tick = tick
    assert loop.run() == 0 and len(ticks) == 3


def test_describe__names_the_statement_never_its_parameters():
    with pytest.raises(psycopg.Error) as raised:
        db.fetch_one("runs_read_status", {"run_id": "\x00secret-looking", "default_max_active": None})
    line = describe(raised.value)
    assert "(in SQL statement runs_read_status)" in line and "secret-looking" not in line
