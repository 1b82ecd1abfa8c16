"""OBX-2..6: per-run causal order under 4 drainers and a receiver failing 20% of requests."""

import threading

import pytest
from django.db import connections

from scheduler import outbound
from scheduler.outbox import drainer
from tests.factories import one
from tests.outbox.factories import backlog_run
from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver():
    fake = FakeReceiver(failure_rate=0.2)
    yield fake
    fake.close()


def drain_with(workers: int, **options) -> None:
    barrier = threading.Barrier(workers)
    errors = []

    def work(index):
        try:
            barrier.wait()
            idle = 0
            while idle < 3:
                result = drainer.run_once(f"test-drainer-{index}", batch=20, backoff_base_ms=2.0, **options)
                idle = idle + 1 if not result.counts["claimed"] else 0
                if not result.counts["claimed"]:
                    pending = one("SELECT count(*) FROM outbox WHERE delivered_at IS NULL AND failed_at IS NULL "
                                  "AND NOT EXISTS (SELECT 1 FROM outbox f WHERE f.run_id = outbox.run_id "
                                  "AND f.failed_at IS NOT NULL)")
                    if pending:
                        idle = 0
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()
            outbound.close_thread_transports()  # this thread's pooled receiver connections

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors


@pytest.mark.requirement("OBX-2")
def test_four_drainers_failing_receiver__causal_first_sightings_all_delivered_failed_head_blocks(receiver):
    launch = {"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN}
    runs = {f"run-{i:03d}": backlog_run(f"run-{i:03d}", facts=12 if i == 7 else 8, launch=launch, start_second=i)
            for i in range(40)}
    blocked_run = "run-007"
    # This receiver grants no prefix batching: one fact per request, so the poisoned fact itself
    # becomes the failed head: facts 0-8 go through, 9-11 never.
    blocked_head = runs[blocked_run][9]
    receiver.always_fail.add(blocked_head)
    drain_with(4, max_attempts=12)
    for run_id, event_ids in runs.items():
        sightings = receiver.first_sightings(run_id)
        if run_id == blocked_run:
            assert sightings == event_ids[:9]  # nothing after the failed head
            assert one("SELECT failed_at IS NOT NULL FROM outbox WHERE event_id = %s", [blocked_head]) is True
            assert one("SELECT count(*) FROM outbox WHERE run_id = %s AND delivered_at IS NOT NULL", [run_id]) == 9
        else:
            assert sightings == event_ids, run_id
    assert one("SELECT count(*) FROM outbox WHERE delivered_at IS NULL") == 3
    assert one("SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL") == 0
    # The failures were real and retried: something was attempted more than once.
    assert one("SELECT max(attempt_count) FROM outbox WHERE delivered_at IS NOT NULL") >= 1


@pytest.mark.requirement("OBX-2")
def test_failed_head__requeued_by_an_operator__the_lane_moves_again(receiver):
    from scheduler.outbox import settle

    launch = {"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN}
    receiver.failure_rate = 0.0
    ids = backlog_run("run-x", facts=4, launch=launch)
    receiver.always_fail.add(ids[1])
    drain_with(1, max_attempts=2)
    assert receiver.first_sightings("run-x") == ids[:1]  # one fact per request: the first arrives, the second fails
    assert one("SELECT failed_at IS NOT NULL FROM outbox WHERE event_id = %s", [ids[1]]) is True
    receiver.always_fail.clear()
    assert settle.requeue_failed_head(ids[1]) is True
    drain_with(1, max_attempts=2)
    assert receiver.first_sightings("run-x") == ids
    assert "coordinator-secret" not in (one("SELECT coalesce(string_agg(last_error, ' '), '') FROM outbox") or "")
