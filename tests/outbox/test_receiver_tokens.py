"""How a drainer process keeps its receiver tokens (OBX-6, OBX-8): run-scoped receivers are learned, so a run's
first request does not carry another run's token only to be refused; and the caches stay bounded however many
runs pass through a long-lived process."""

import time

import pytest

from scheduler.outbox import drainer
from scheduler.outbox.receivers import authority
from tests.outbox.factories import backlog_run
from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver():
    fake = FakeReceiver()
    yield fake
    fake.close()


@pytest.fixture(autouse=True)
def no_receiver_learned():
    authority._RUN_SCOPED_RECEIVERS.clear()
    yield
    authority._RUN_SCOPED_RECEIVERS.clear()


def deliver_runs(fake, run_ids: list[str]) -> list[int]:
    """Each run's one fact delivered by a drain of its own, in turn; the events requests each run took."""
    launch = {"runtimeApiBaseUrl": fake.url, "coordinatorInternalToken": COORDINATOR_TOKEN}
    taken = []
    for second, run_id in enumerate(run_ids):
        backlog_run(run_id, facts=1, launch=launch, start_second=second)
        before = len(fake.event_requests())
        assert drainer.run_once("token-drainer").counts["delivered"] == 1
        taken.append(len(fake.event_requests()) - before)
    return taken


@pytest.mark.requirement("OBX-8")
def test_a_receiver_that_scopes_tokens_per_run__refuses_another_runs_token_once__then_each_run_mints_its_own(receiver):
    """Without the learning, every run after the first would send a request that is refused (2 requests each)."""
    assert deliver_runs(receiver, ["scoped-a", "scoped-b", "scoped-c", "scoped-d"]) == [1, 2, 1, 1]
    assert receiver.token_requests == 4
    bearers = [request["headers"]["authorization"] for request in receiver.event_requests()]
    assert bearers == ["Bearer dispatch-scoped-a", "Bearer dispatch-scoped-a", "Bearer dispatch-scoped-b",
                       "Bearer dispatch-scoped-c", "Bearer dispatch-scoped-d"]


@pytest.mark.requirement("OBX-8")
def test_a_receiver_whose_tokens_serve_any_run__gets_one_token_for_the_deployment_as_the_seed_caches_it(receiver):
    receiver.token_scope = "deployment"
    assert deliver_runs(receiver, ["shared-a", "shared-b", "shared-c"]) == [1, 1, 1]
    assert receiver.token_requests == 1


@pytest.mark.requirement("OBX-8")
def test_what_was_learned_lapses__then_the_receiver_is_offered_a_shared_token_again(receiver):
    deliver_runs(receiver, ["lapse-a", "lapse-b"])
    assert len(authority._RUN_SCOPED_RECEIVERS) == 1
    receiver.token_scope = "deployment"  # the receiver's owner changed its policy meanwhile
    for key in authority._RUN_SCOPED_RECEIVERS:
        authority._RUN_SCOPED_RECEIVERS[key] = time.monotonic() - 1
    minted = receiver.token_requests
    assert deliver_runs(receiver, ["lapse-c", "lapse-d"]) == [1, 1]
    assert receiver.token_requests == minted + 1  # one shared token for both, as before anything was learned


def test_token_caches__bounded__the_least_recently_used_leave_first():
    """A token per run (a run-scoped receiver, the per-run authorities) must not grow a drainer without end."""
    cache = authority._Cache()
    lasting = authority.Authority("https://ledger.example.com", "t", False, False, time.time() + 3600)
    for index in range(authority.MAX_CACHED):
        cache.put(index, lasting)
    cache.get(0)  # used again: the most recent now
    for index in range(authority.MAX_CACHED, authority.MAX_CACHED + 100):
        cache.put(index, lasting)
    assert len(cache) <= authority.MAX_CACHED
    assert cache.get(0) is lasting and cache.get(authority.MAX_CACHED + 99) is lasting
    assert cache.get(1) is None


def test_token_caches__when_full__entries_that_cannot_be_reused_leave_before_any_other():
    cache = authority._Cache()
    lasting = authority.Authority("https://ledger.example.com", "t", False, False, time.time() + 3600)
    spent = authority.Authority("https://ledger.example.com", "t", False, False, time.time() - 1)
    cache.put("oldest", lasting)
    for index in range(authority.MAX_CACHED - 1):
        cache.put(index, spent)
    cache.put("newest", lasting)
    assert cache.get("oldest") is lasting and cache.get("newest") is lasting and len(cache) == 2
