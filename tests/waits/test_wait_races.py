"""WAIT-3, WAIT-4, WAIT-6 under real concurrency: an event, a timer, a cancel and a suspension racing for one wait,
each on its own connection and released together by a barrier, end in exactly one resume or one cancel."""

import datetime as dt

import pytest

from scheduler.kinds import WaitKind
from scheduler.runs import lifecycle
from scheduler.waits import wakeups
from tests import factories
from tests.concurrency.threads import run_together
from tests.factories import one, query
from tests.waits.conftest import begin, post_suspended, suspended_run

pytestmark = pytest.mark.django_db(transaction=True)
ROUNDS = 8


def send(run_id: str, event_id: str):
    def call():
        try:
            return wakeups.send(wakeups.Event.checked(run_id, "approved", {"id": event_id}, event_id))
        except wakeups.RunFinished:
            return "refused"
    return call


def resumed_facts(run_id: str) -> int:
    return one("SELECT count(*) FROM outbox WHERE run_id = %s AND event_type = 'run.resumed'", [run_id])


def timed_run() -> str:
    """A run waiting for `approved` with a timeout that has already passed: the timer and an event both may wake it."""
    parked = suspended_run(kind=WaitKind.EVENT, delay_ms=60_000)
    query("UPDATE runs SET wait_deadline = now() - interval '1 second' WHERE run_id = %s", [parked.run_id])
    return parked.run_id


@pytest.mark.requirement("WAIT-3", "WAIT-4")
def test_an_event_and_the_timer_racing__one_resume():
    for round_number in range(ROUNDS):
        run_id = timed_run()
        sent, woken = run_together(send(run_id, f"e{round_number}"), lambda: wakeups.wake_due(limit=1000))
        assert sent.get().stored, "the event is kept whichever wins: the resumed wait consumes it"
        assert int(sent.get().resumed) + woken.get().counts["woken"] == 1
        assert resumed_facts(run_id) == 1 and one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
        lifecycle.cancel_run(run_id)  # out of the next round's way


@pytest.mark.requirement("WAIT-3", "WAIT-6")
def test_an_event_and_a_cancel_racing__one_resume_or_none__one_cancel():
    for round_number in range(ROUNDS):
        run_id = suspended_run().run_id
        sent, cancelled = run_together(send(run_id, f"e{round_number}"),
                                       lambda: lifecycle.cancel_run(run_id, "racing"))
        assert cancelled.get().cancelled_now
        assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "cancelled"
        assert one("SELECT count(*) FROM outbox WHERE run_id = %s AND event_type = 'run.cancelled'", [run_id]) == 1
        if sent.get() == "refused":  # the cancel came first: the event found a finished run and stored nothing
            assert resumed_facts(run_id) == 0 and one("SELECT count(*) FROM run_events WHERE run_id = %s",
                                                      [run_id]) == 0
        else:  # the event came first: the run resumed, and the cancel found it queued
            assert sent.get().resumed and resumed_facts(run_id) == 1


@pytest.mark.requirement("WAIT-3")
def test_two_events_racing__one_resume__both_kept():
    for round_number in range(ROUNDS):
        run_id = suspended_run().run_id
        first, second = run_together(send(run_id, f"a{round_number}"), send(run_id, f"b{round_number}"))
        assert [first.get().resumed, second.get().resumed].count(True) == 1
        assert resumed_facts(run_id) == 1
        assert one("SELECT count(*) FROM run_events WHERE run_id = %s AND consumed_key IS NULL", [run_id]) == 2
        lifecycle.cancel_run(run_id)


@pytest.mark.requirement("WAIT-2", "WAIT-3")
def test_an_event_racing_the_suspension_itself__one_resume():
    for round_number in range(ROUNDS):
        parked = factories.parked_run()
        assert begin(parked).outcome == "suspend"
        sent, suspended = run_together(send(parked.run_id, f"e{round_number}"), lambda: post_suspended(parked))
        # Whichever took the run first: the event found it waiting, or the suspension found the event there.
        assert suspended.get().run_status in ("waiting", "queued")
        assert resumed_facts(parked.run_id) == 1
        assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "queued"
        lifecycle.cancel_run(parked.run_id)


@pytest.mark.requirement("WAIT-4", "WAIT-6")
def test_the_timer_and_a_cancel_racing__one_cancel__at_most_one_resume():
    for _ in range(ROUNDS):
        run_id = timed_run()
        woken, cancelled = run_together(lambda: wakeups.wake_due(limit=1000, now=dt.datetime.now(dt.UTC)),
                                        lambda: lifecycle.cancel_run(run_id, "racing"))
        assert cancelled.get().cancelled_now and resumed_facts(run_id) == woken.get().counts["woken"] <= 1
        assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "cancelled"


@pytest.mark.requirement("WAIT-2", "WAIT-6")
def test_a_cancel_racing_the_suspension_itself__the_run_ends_cancelled_once():
    for _ in range(ROUNDS):
        parked = factories.parked_run()
        assert begin(parked).outcome == "suspend"
        run_together(lambda: lifecycle.cancel_run(parked.run_id, "racing"), lambda: post_suspended(parked))
        # Whichever took the run first: the cancel found it waiting durably, or the suspension found the cancel.
        assert one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "cancelled"
        assert one("SELECT count(*) FROM outbox WHERE run_id = %s AND event_type = 'run.cancelled'",
                   [parked.run_id]) == 1
