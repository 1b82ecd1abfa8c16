"""The newcomer's demo (`./dev up`): what it prints as its run moves, through the statements it reads."""

import datetime as dt

import pytest

from scheduler.outbox import drainer
from scheduler.runs import lifecycle
from scheduler.stack.demo import DemoRun
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_run__prints_each_status__the_output__then_the_facts_delivered():
    lines = []
    demo = DemoRun(lines.append, "demo run", "scheduler.plays:hello", {"name": "newcomer"})
    demo.launch()
    demo.poll()
    claimed = factories.claim(demo.run_id)
    now_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    lifecycle.park(demo.run_id, claimed.attempt, claimed.lease_token, {"provider": "local", "sandboxId": "sb"},
                   heartbeat_timeout_ms=30_000, started_at_ms=now_ms, resource={"sandboxId": "sb"})
    factories.report_terminal(demo.run_id, claimed.attempt, claimed.lease_token,
                              factories.completed_result({"greeting": "hello, newcomer"}))
    demo.poll()
    demo.poll()  # the facts are not delivered yet: nothing more to say
    drainer.run_once("demo-drainer")
    demo.poll()
    said = [line.split(": ", 1)[1] for line in lines]
    assert said[0].startswith("launched (play scheduler.plays:hello")
    assert said[1:] == ["queued", 'completed: {"greeting": "hello, newcomer"}', "4 facts delivered to the built-in run ledger"]


@pytest.mark.requirement("WAIT-7")
def test_waiting_demo_run__says_it_waits_released__sends_the_approval__the_run_resumes():
    from scheduler.stack.demo import WaitingDemoRun
    from tests.waits.conftest import begin, post_suspended, resumed_attempt

    lines = []
    demo = WaitingDemoRun(lines.append)
    demo.launch()
    claimed = factories.claim(demo.run_id)
    lifecycle.park(demo.run_id, claimed.attempt, claimed.lease_token, {"provider": "local", "sandboxId": "sb"},
                   heartbeat_timeout_ms=30_000, started_at_ms=0, resource=None)
    parked = factories.Parked(demo.run_id, claimed.attempt, claimed.lease_token, "sb")
    assert begin(parked).outcome == "suspend" and post_suspended(parked).run_status == "waiting"
    demo.poll()
    said = [line.split(": ", 1)[1] for line in lines]
    assert said[-2] == "waiting for the event approved with its sandbox released (suspended, not billed)"
    assert said[-1].startswith("sent the event approved") and said[-1].endswith("resumed in a new sandbox")
    assert lifecycle.run_status(demo.run_id).status == "queued"
    assert begin(resumed_attempt(demo.run_id)).output["event"]["payload"] == {"by": "the demo"}
