"""The outbox reads as stages (claim, route, deliver, settle): a delivery's walk enters each stage's module once,
and data flows one way: no stage calls into the one before it."""

import sys
from collections import Counter
from pathlib import Path

import pytest

import scheduler.outbox
from scheduler.outbox import drainer
from tests.outbox.factories import backlog_run
from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver

OUTBOX = Path(scheduler.outbox.__file__).resolve().parent
# The stages in the order data flows through them; the drainer (the loop over them) and the value types
# (facts.py, receivers/interface.py) are not stages.
STAGES = ["claims.py", "routing.py", "receivers/__init__.py", "receivers/builtin_ledger.py",
          "receivers/search_lane.py", "receivers/ledger_http.py", "settle.py"]


def walk(run) -> tuple[Counter, set]:
    """Entries into each stage from another scheduler module while `run` runs (this thread), and the
    (caller stage, callee stage) pairs."""
    entries, calls = Counter(), set()

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = Path(frame.f_code.co_filename), Path(frame.f_back.f_code.co_filename)
        # The walk: calls from the drainer or from one stage into another (a receiver's own helpers, such as the
        # HTTP receiver's authority.py, and kernel callbacks are not stage entries).
        if callee == caller or not callee.is_relative_to(OUTBOX) or not caller.is_relative_to(OUTBOX):
            return
        if caller.relative_to(OUTBOX).as_posix() not in ["drainer.py", *STAGES]:
            return
        name = callee.relative_to(OUTBOX).as_posix()
        if name in STAGES:
            entries[name] += 1
            if caller.is_relative_to(OUTBOX) and caller.relative_to(OUTBOX).as_posix() in STAGES:
                calls.add((caller.relative_to(OUTBOX).as_posix(), name))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return entries, calls


def forward(calls: set) -> bool:
    return all(STAGES.index(caller) < STAGES.index(callee) for caller, callee in calls)


@pytest.mark.django_db(transaction=True)
def test_an_external_delivery__enters_each_stage_once_per_prefix__one_way():
    fake = FakeReceiver()
    try:
        for index in range(3):
            backlog_run(f"run-{index}", facts=3, start_second=index,
                        launch={"runtimeApiBaseUrl": fake.url, "coordinatorInternalToken": COORDINATOR_TOKEN})
        entries, calls = walk(lambda: drainer.run_once("stages", batch=3))
    finally:
        fake.close()
    # claims: the listing, the one claim and, after the tick, the look at the outbox's statistics; the receivers and
    # settle once for the claim; route once a prefix.
    assert entries == {"claims.py": 3, "routing.py": 3, "receivers/__init__.py": 1,
                       "receivers/ledger_http.py": 1, "settle.py": 1}, entries
    assert forward(calls), calls


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lane,receiver", [("ledger", "receivers/builtin_ledger.py"),
                                           ("search", "receivers/search_lane.py")])
def test_a_delivery_in_this_database__enters_each_stage_once_per_prefix__one_way(lane, receiver):
    for index in range(3):
        backlog_run(f"run-{index}", facts=3, start_second=index, lane=lane)
    entries, calls = walk(lambda: drainer.run_once("stages", lane=lane, batch=3))
    assert entries == {"claims.py": 3, "routing.py": 3, "receivers/__init__.py": 1, receiver: 1, "settle.py": 1}, entries
    assert forward(calls), calls


def test_every_receiver_kind_has_one_registered_receiver():
    from scheduler.kinds import ReceiverKind
    from scheduler.outbox.receivers import RECEIVERS

    assert set(RECEIVERS) == set(ReceiverKind)
    assert all(receiver.kind is kind for kind, receiver in RECEIVERS.items())
