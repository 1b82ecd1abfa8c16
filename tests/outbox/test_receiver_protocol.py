"""The run-ledger receiver protocol as the seed speaks it: receiver resolution, executor-token reuse,
prefix batching only when granted, Vercel's bypass header, and the per-run dispatch authority."""

import logging
import time

import pytest

from scheduler.outbox import drainer, routing
from scheduler.outbox.receivers import authority
from scheduler.outbox.facts import Fact, Prefix
from tests.factories import one, query
from tests.outbox.factories import backlog_run
from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver, jwt

pytestmark = pytest.mark.django_db(transaction=True)
BYPASS = "vercel-bypass-secret-123"


@pytest.fixture
def receiver():
    fake = FakeReceiver()
    yield fake
    fake.close()


def launch_for(fake, **extra) -> dict:
    return {"runtimeApiBaseUrl": fake.url, "coordinatorInternalToken": COORDINATOR_TOKEN, **extra}


def drain() -> dict:
    return drainer.run_once("protocol-drainer", max_attempts=3, backoff_base_ms=1.0).counts


def bearers(fake) -> list[str]:
    return [request["headers"]["authorization"].removeprefix("Bearer ") for request in fake.event_requests()]


# ---- 1. which receiver ------------------------------------------------------

def test_receiver__runtime_api_base_url_else_base_url(receiver):
    other = FakeReceiver()
    try:
        backlog_run("run-base", facts=2, launch={"baseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN})
        backlog_run("run-both", facts=2, launch={**launch_for(other), "baseUrl": receiver.url}, start_second=1)
        assert drain()["delivered"] == 4
        assert receiver.first_sightings("run-base") and not receiver.first_sightings("run-both")
        assert other.first_sightings("run-both") and not other.first_sightings("run-base")
    finally:
        other.close()
    assert routing.ordinary_receiver({}) is None  # the built-in receiver


# ---- 2. the launch's pre-minted executorToken ----------------------------------

def test_executor_token__reused_while_it_has_lifetime__no_dispatch_token_minted(receiver):
    token = jwt({"exp": time.time() + 3600})
    receiver.executor_tokens.add(token)
    backlog_run("run-exec", facts=3, launch=launch_for(receiver, executorToken=token))
    assert drain()["delivered"] == 3
    assert receiver.token_requests == 0 and set(bearers(receiver)) == {token}


@pytest.mark.parametrize("token", [jwt({"exp": time.time() + 5}), "opaque-executor-token", jwt({"sub": "no-exp"})])
def test_executor_token__near_expiry_or_unreadable__a_dispatch_token_instead(receiver, token):
    receiver.executor_tokens.add(token)
    backlog_run("run-exec", facts=2, launch=launch_for(receiver, executorToken=token))
    assert drain()["delivered"] == 2
    assert receiver.token_requests == 1 and token not in bearers(receiver)


def test_executor_token__a_401_drops_it_and_mints_once(receiver):
    token = jwt({"exp": time.time() + 3600})
    receiver.executor_tokens.add(token)
    receiver.unauthorized_once.add(token)
    backlog_run("run-exec", facts=2, launch=launch_for(receiver, executorToken=token))
    assert drain()["delivered"] == 2
    assert receiver.token_requests == 1
    assert bearers(receiver) == [token, "dispatch-run-exec", "dispatch-run-exec"]


def test_executor_token__never_for_a_receiver_other_than_the_launchs_own(receiver):
    launch = {"runtimeApiBaseUrl": "https://app.example.com", "executorToken": jwt({"exp": time.time() + 3600})}
    assert authority._pre_minted(launch, "https://app.example.com") is not None
    assert authority._pre_minted(launch, "https://projection.example.com") is None


# ---- 3. prefix batching only when granted ---------------------------------------

def test_batching__withheld__one_fact_per_request_in_order(receiver):
    ids = backlog_run("run-one", facts=4, launch=launch_for(receiver))
    assert drain()["delivered"] == 4
    assert [request["body"]["events"][0]["eventId"] for request in receiver.event_requests()] == ids
    assert all(len(request["body"]["events"]) == 1 for request in receiver.event_requests())


def test_batching__granted_but_the_receiver_origin_is_mutable__one_fact_per_request(receiver):
    receiver.grant_batching = True
    backlog_run("run-http", facts=3, launch=launch_for(receiver))
    assert drain()["delivered"] == 3
    assert len(receiver.event_requests()) == 3  # http://127.0.0.1 is not an immutable origin


def test_batching__granted_on_an_immutable_origin__the_prefix_in_one_request(receiver, monkeypatch):
    receiver.grant_batching = True
    monkeypatch.setattr(authority, "is_immutable_origin", lambda origin: origin == receiver.url)
    ids = backlog_run("run-batch", facts=4, launch=launch_for(receiver))
    assert drain()["delivered"] == 4
    [request] = receiver.event_requests()
    assert [event["eventId"] for event in request["body"]["events"]] == ids


def test_batching__off_on_the_ordinary_receiver_when_the_launch_names_a_distinct_terminal_origin(receiver, monkeypatch):
    receiver.grant_batching = True
    monkeypatch.setattr(authority, "is_immutable_origin", lambda origin: origin == receiver.url)
    launch = launch_for(receiver, arrayInputTerminalRetirementSupported=True,
                        arrayInputTerminalProjectionOrigin="https://projection.example.com")
    backlog_run("run-staged", facts=3, launch=launch)
    assert drain()["delivered"] == 3
    assert len(receiver.event_requests()) == 3


def test_batching_grant__needs_true_and_an_immutable_origin():
    assert authority.batching_granted({"runLedgerIngressPrefixBatching": True}, "https://app.example.com")
    assert not authority.batching_granted({"runLedgerIngressPrefixBatching": "true"}, "https://app.example.com")
    assert not authority.batching_granted({}, "https://app.example.com")
    assert not authority.batching_granted({"runLedgerIngressPrefixBatching": True}, "https://app-git-x.vercel.app")


# ---- 4. Vercel deployment protection ---------------------------------------

def test_vercel_bypass__every_request_carries_the_header(receiver):
    backlog_run("run-vercel", facts=2, launch=launch_for(receiver, vercelProtectionBypassToken=BYPASS))
    assert drain()["delivered"] == 2
    assert len(receiver.requests) == 3  # one token request, two events requests
    assert all(request["headers"].get("x-vercel-protection-bypass") == BYPASS for request in receiver.requests)


def test_vercel_bypass__never_in_an_error_or_a_log(receiver, caplog):
    caplog.set_level(logging.DEBUG)
    launch = {"runtimeApiBaseUrl": f"http://127.0.0.1:9/{BYPASS}", "coordinatorInternalToken": COORDINATOR_TOKEN,
              "vercelProtectionBypassToken": BYPASS}
    backlog_run("run-down", facts=1, launch=launch)
    for _ in range(3):
        drain()
        query("UPDATE outbox SET next_attempt_at = NULL WHERE run_id = 'run-down'")
    errors = one("SELECT string_agg(coalesce(last_error, ''), ' ') FROM outbox WHERE run_id = 'run-down'")
    assert "unreachable" in errors and BYPASS not in errors and BYPASS not in caplog.text


def test_delivered_requests__their_urls_stay_out_of_the_log(receiver, caplog):
    """httpx logs each request's whole URL at INFO; a receiver URL may carry a token, so its logger is quiet."""
    caplog.set_level(logging.INFO)
    backlog_run("run-quiet", facts=2, launch=launch_for(receiver))
    assert drain()["delivered"] == 2
    assert receiver.url not in caplog.text
    assert not [record for record in caplog.records if record.name.startswith(("httpx", "httpcore"))]


# ---- 5. the per-run dispatch authority ---------------------------------------

def _prefix(fake, run_id="run-auth", kinds=("run.progress",)) -> Prefix:
    facts = [Fact(f"{run_id}:{i}", run_id, kind, {}, None, 0) for i, kind in enumerate(kinds)]
    return Prefix(run_id, "ledger", "owner-1", facts, launch_for(fake), "org")


def test_authority__cached_per_run_and_lease_owner(receiver):
    receiver.token_style = "jwt"
    prefix = _prefix(receiver)
    first = authority.resolve(prefix, receiver.url, terminal_projection=False, terminal_origin=None)
    assert authority.resolve(prefix, receiver.url, terminal_projection=False, terminal_origin=None) is first
    other_owner = Prefix(prefix.run_id, prefix.lane, "owner-2", prefix.facts, prefix.dispatch_launch, "org")
    authority.resolve(other_owner, receiver.url, terminal_projection=False, terminal_origin=None)
    assert {owner for (_, run_id, owner) in authority.RUN_AUTHORITIES._entries if run_id == "run-auth"} == {
        "owner-1", "owner-2"}
    assert receiver.token_requests == 1  # the second owner found the token in the dispatch-token cache


def test_authority__an_origin_change_within_the_launch_fails_unless_it_is_the_terminal_origin(receiver):
    prefix = _prefix(receiver)
    key = ("runtime_scheduler", prefix.run_id, prefix.lease_owner)
    stale = authority.Authority("https://old.example.com", "t", False, False, time.time() - 1)
    authority.RUN_AUTHORITIES.put(key, stale)
    with pytest.raises(routing.DeliveryError, match="Run Ledger dispatch origin changed within an immutable launch."):
        authority.resolve(prefix, receiver.url, terminal_projection=False, terminal_origin=None)
    authority.RUN_AUTHORITIES.put(key, stale)
    assert authority.resolve(prefix, receiver.url, terminal_projection=True, terminal_origin=receiver.url)


def test_opaque_dispatch_tokens__used_once_never_cached(receiver):
    receiver.token_style = "opaque"
    backlog_run("run-opaque", facts=1, launch=launch_for(receiver))
    backlog_run("run-opaque-2", facts=1, launch=launch_for(receiver), start_second=1)
    assert drain()["delivered"] == 2
    assert receiver.token_requests == 2


def test_deliveries_reuse_their_connection_to_a_receiver(receiver):
    backlog_run("run-pooled", facts=4, launch=launch_for(receiver))
    assert drain()["delivered"] == 4
    ports = {request["client_port"] for request in receiver.requests}
    assert len(receiver.requests) == 5 and len(ports) == 1  # a token request and four events, one connection


@pytest.mark.requirement("OBX-8")
def test_a_route_cut_before_a_terminal_bound_elsewhere__delivers_the_rest__returns_the_terminal(receiver):
    """OBX-8: the facts before a staged terminal go to the ordinary receiver; the terminal's lease is returned
    unspent (no attempt counted), for the next claim, which starts at it."""
    launch = launch_for(receiver, arrayInputTerminalRetirementSupported=True,
                        arrayInputTerminalProjectionOrigin="https://projection.example.com")
    ids = backlog_run("run-cut", kinds=["run.progress", "run.progress", "run.completed"], launch=launch,
                      array_input_started=True)
    counts = drainer.run_once("cutting-drainer", batch=1).counts
    assert (counts["delivered"], counts["released"], counts["retried"]) == (2, 1, 0)
    assert [event["eventId"] for request in receiver.event_requests() for event in request["body"]["events"]] == ids[:2]
    assert query("SELECT delivered_at IS NULL, lease_owner, attempt_count FROM outbox WHERE event_id = %s",
                 [ids[2]]) == [(True, None, 0)]
