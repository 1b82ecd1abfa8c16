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
