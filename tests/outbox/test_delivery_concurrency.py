"""OBX-6 (issue 47): a claim's runs go to their receivers several at once (SCHEDULER_DELIVERY_CONCURRENCY), each
run's facts on one thread in causal order, and each run's outcome settled as if it had been delivered alone."""

import threading

import pytest

from scheduler.outbox import drainer
from tests.factories import query
from tests.outbox.factories import backlog_run
from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    fake = FakeReceiver()
    yield fake
    fake.close()


def runs(receiver, count: int, facts: int = 3) -> dict[str, list[str]]:
    launch = {"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN}
    return {f"run-{index}": backlog_run(f"run-{index}", facts=facts, start_second=index, launch=launch)
            for index in range(count)}


@pytest.mark.requirement("OBX-6")
def test_a_claims_runs_are_delivered_together__each_runs_facts_in_causal_order(receiver, settings):
    settings.SCHEDULER_DELIVERY_CONCURRENCY = 4
    # Every request waits until four are in flight: delivered one run after another, none would ever arrive.
    receiver.meeting = threading.Barrier(4, timeout=20)
    ids = runs(receiver, 4)

    tick = drainer.run_once("owner")

    assert tick.counts["delivered"] == 12 and tick.counts["retried"] == 0
    assert receiver.most_in_flight == 4
    # This receiver grants no batching: one fact a request, so each run's requests came in its causal order.
    assert {run_id: receiver.first_sightings(run_id) for run_id in ids} == ids
    assert query("SELECT count(*) FROM outbox WHERE delivered_at IS NULL OR lease_owner IS NOT NULL") == [(0,)]


def test_one_at_a_time__one_request_in_flight(receiver, settings):
    settings.SCHEDULER_DELIVERY_CONCURRENCY = 1
    ids = runs(receiver, 4)

    assert drainer.run_once("owner").counts["delivered"] == 12
    assert receiver.most_in_flight == 1
    assert {run_id: receiver.first_sightings(run_id) for run_id in ids} == ids


@pytest.mark.requirement("OBX-6")
def test_a_run_its_receiver_refuses__is_retried_alone__the_others_acknowledged(receiver, settings):
    settings.SCHEDULER_DELIVERY_CONCURRENCY = 4
    ids = runs(receiver, 4)
    receiver.always_fail.add(ids["run-2"][1])  # its first fact arrives, its second is refused

    tick = drainer.run_once("owner", backoff_base_ms=60_000)

    assert tick.counts["retried"] == 1 and tick.counts["delivered"] == 10
    assert dict(query("SELECT run_id, count(*) FILTER (WHERE delivered_at IS NOT NULL) FROM outbox GROUP BY run_id")) \
        == {"run-0": 3, "run-1": 3, "run-2": 1, "run-3": 3}
    # The refused fact heads its run now: one attempt counted on it, backed off, its lease returned.
    assert query("SELECT event_id, attempt_count, next_attempt_at IS NOT NULL AND next_attempt_at > now(), lease_owner FROM outbox "
                 "WHERE run_id = 'run-2' AND delivered_at IS NULL ORDER BY created_at") \
        == [(ids["run-2"][1], 1, True, None), (ids["run-2"][2], 0, False, None)]
