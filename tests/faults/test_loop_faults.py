"""The worker loop survives a failed tick, goes again when its batch was full, and ends only on bad configuration."""

import logging
import threading
import time

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


def test_a_partial_batch__the_next_tick_waits_out_the_cooldown_from_the_last_ones_start():
    """Work that arrives during the cooldown shares the next tick's statement (issue 47): a partial batch looks
    again no sooner than `cooldown` after the tick before it started; a full one at once (interval=60 would hang)."""
    starts = []
    loop = _loop(lambda: None, cooldown=0.2)

    def tick():
        starts.append(time.monotonic())
        if len(starts) == 4:
            loop.stopping.set()
        return Tick({"claimed": 1}, again=True, partial=len(starts) % 2 == 1)

    loop.tick = tick
    assert loop.run() == 0
    assert starts[1] - starts[0] >= 0.2 and starts[3] - starts[2] >= 0.2


def test_a_stop_during_the_cooldown__ends_the_loop_without_another_tick():
    ticks = []
    loop = _loop(lambda: None, cooldown=3600)

    def tick():
        ticks.append(1)
        threading.Timer(0.05, loop.stopping.set).start()
        return Tick({"claimed": 1}, again=True, partial=True)

    loop.tick = tick
    assert loop.run() == 0 and ticks == [1]


def test_a_partial_tick_that_does_not_ask_to_go_again__looks_again_after_the_cooldown_without_arming():
    """A drainer's tick that delivered some and found no more: with a cooldown it neither arms its wake signal
    nor waits its interval (60 s: the test would hang), it looks again once the cooldown is over."""
    starts, armed = [], []
    loop = _loop(lambda: None, cooldown=0.1, arm=lambda: armed.append(1))

    def tick():
        starts.append(time.monotonic())
        if len(starts) == 3:
            loop.stopping.set()
        return Tick({"claimed": 1}, again=False, partial=True)

    loop.tick = tick
    assert loop.run() == 0
    assert armed == [] and starts[1] - starts[0] >= 0.1 and starts[2] - starts[1] >= 0.1
