"""OBX-4 orders, OBX-7 hints, OBX-8 routing, OBX-10 built-in receiver, TRM-6, SCH-3 historical schema."""

import datetime as dt
import json

import pytest

from scheduler.outbox import claims, routing, settle
from scheduler.outbox.facts import Fact, Prefix
from scheduler.outbox.receivers import authority
from scheduler.outbox.receivers.interface import ledger_event
from scheduler.errors import InvalidInput
from scheduler.outbox import drainer
from tests import factories
from tests.factories import one, query
from tests.outbox.factories import backlog_run, claim_one

pytestmark = pytest.mark.django_db


def order(priority):
    return [row["run_id"] for row in claims.list_ready_runs("ledger", priority, 10)]


def test_admission_first_and_oldest_ready__the_two_documented_orders():
    backlog_run("a-progress", kinds=["run.progress"], start_second=1)
    backlog_run("b-waiting", kinds=["run.progress", "run.waiting"], start_second=2)
    backlog_run("c-terminal", kinds=["run.progress", "run.completed"], start_second=3)
    backlog_run("d-created", kinds=["run.created"], start_second=4)
    backlog_run("e-created", kinds=["run.created", "run.started"], start_second=5)
    assert order("oldest_ready") == ["a-progress", "b-waiting", "c-terminal", "d-created", "e-created"]
    assert order("admission_first") == ["d-created", "e-created", "c-terminal", "b-waiting", "a-progress"]


def test_ready__failed_head_backoff_and_live_lease_keep_a_run_out():
    backlog_run("failed", kinds=["run.progress", "run.completed"], start_second=1)
    backlog_run("backoff", kinds=["run.progress"], start_second=2)
    backlog_run("leased", kinds=["run.progress"], start_second=3)
    backlog_run("ready", kinds=["run.progress"], start_second=4)
    query("UPDATE outbox SET failed_at = now() WHERE run_id = 'failed' AND event_type = 'run.progress'")
    query("UPDATE outbox SET next_attempt_at = now() + interval '1 hour' WHERE run_id = 'backoff'")
    query("UPDATE outbox SET lease_owner = 'x', lease_expires_at = now() + interval '1 hour' WHERE run_id = 'leased'")
    assert order("oldest_ready") == order("admission_first") == ["ready"]
    query("UPDATE outbox SET lease_expires_at = now() - interval '1 second' WHERE run_id = 'leased'")
    assert "leased" in order("oldest_ready")  # an expired lease is reclaimable


def test_claim__causal_prefix_of_at_most_eight_under_one_lease():
    ids = backlog_run("run-1", facts=11)
    prefix = claim_one("ledger", "owner-a")
    assert [fact.event_id for fact in prefix.facts] == ids[:8]
    assert one("SELECT count(*) FROM outbox WHERE lease_owner = 'owner-a'") == 8
    assert claim_one("ledger", "owner-b") is None  # the run's lane is held
    assert len(settle.acknowledge(prefix.lease_owner, prefix.fact_ids)) == 8
    assert [fact.event_id for fact in claim_one("ledger", "owner-b").facts] == ids[8:]


@pytest.mark.parametrize("limit,exclude", [
    (0, []), (4, []), (1.0, []), (True, []),
    (1, [f"run-{i}" for i in range(33)]), (1, ["a", "a"]), (1, [""]), (1, [" a"]), (1, ["a "]), (1, "run-1"),
])
def test_hints__bad_arguments_refused(limit, exclude):
    with pytest.raises(InvalidInput):
        claims.admission_hints(limit, exclude)


def test_hints__valid_call_reserves_nothing():
    backlog_run("run-1", kinds=["run.created"], start_second=1)
    backlog_run("run-2", kinds=["run.progress"], start_second=2)
    backlog_run("run-3", kinds=["run.created"], start_second=3)
    before = factories.table_state()
    assert claims.admission_hints(3, ["run-1"]) == ["run-3", "run-2"]
    assert claims.admission_hints(1, []) == ["run-1"]
    assert factories.table_state() == before


def staged_prefix(started, supported, origin, kinds=("run.completed",)):
    launch = {"runtimeApiBaseUrl": "https://ledger.example.com"}
    if supported is not None:
        launch["arrayInputTerminalRetirementSupported"] = supported
    if origin is not None:
        launch["arrayInputTerminalProjectionOrigin"] = origin
    facts = [Fact(f"e{i}", "run", kind, {}, dt.datetime(2026, 1, 1, tzinfo=dt.UTC), 0) for i, kind in enumerate(kinds)]
    return Prefix("run", "ledger", "owner", facts, launch, "org", array_input_started=started)


IMMUTABLE = "https://projection.example.com"


@pytest.mark.parametrize("started,supported,origin,expected", [
    (False, True, IMMUTABLE, "https://ledger.example.com"),
    (False, False, None, "https://ledger.example.com"),
    (False, None, "http://mutable.example.com/path", "https://ledger.example.com"),
    (True, True, IMMUTABLE, IMMUTABLE),
    (True, True, IMMUTABLE + "/", IMMUTABLE + "/"),
    (True, False, IMMUTABLE, "refused"),
    (True, None, IMMUTABLE, "refused"),
    (True, True, None, "refused"),
    (True, True, "http://projection.example.com", "refused"),
    (True, True, "https://projection.example.com/v2", "refused"),
    (True, True, "https://projection.example.com?x=1", "refused"),
    (True, True, "https://app-git-feature-team.vercel.app", "refused"),
])
def test_staged_array_routing__matrix(started, supported, origin, expected):
    prefix = staged_prefix(started, supported, origin)
    if expected == "refused":
        route = routing.route(prefix)
        assert isinstance(route.error, routing.DeliveryError) and str(route.error) == routing.STAGED_REFUSAL
    else:
        route = routing.route(prefix)
        assert (route.error, route.base_url, route.facts, route.released) == (None, expected, prefix.facts, [])


def test_staged_array_routing__nonterminal_prefix_never_batched_into_a_terminal_elsewhere():
    prefix = staged_prefix(True, True, IMMUTABLE, kinds=("run.progress", "run.progress", "run.completed"))
    route = routing.route(prefix)
    assert (route.base_url, route.facts, route.released) == ("https://ledger.example.com", prefix.facts[:2], prefix.facts[2:])


def test_staged_array_refusal__settled_through_the_failure_policy_not_stranded():
    backlog_run("run-s", kinds=["run.completed"], array_input_started=True,
                launch={"runtimeApiBaseUrl": "https://ledger.example.com"})
    result = drainer.run_once("owner", max_attempts=5)
    assert result.counts["retried"] == 1
    error, owner, attempts = one("SELECT last_error, lease_owner, attempt_count FROM outbox WHERE run_id = 'run-s'")
    assert routing.STAGED_REFUSAL in error and owner is None and attempts == 1


@pytest.mark.requirement("SCH-3")
def test_a_claim_reads_a_terminal_runs_array_input_intent_once__its_leased_prefix_keeps_what_was_read(monkeypatch):
    backlog_run("run-intent", kinds=["run.progress", "run.completed"], array_input_started=True,
                launch={"runtimeApiBaseUrl": IMMUTABLE})
    real, statements = claims.db.fetch_all, []
    monkeypatch.setattr(claims.db, "fetch_all",
                        lambda name, *args, **kwargs: statements.append(name) or real(name, *args, **kwargs))
    leased = claims.claim(["run-intent"], "ledger", "owner", lease_seconds=30.0, max_runs=1,
                          deliver_here=lambda read: [])
    assert [prefix.array_input_started for prefix in leased] == [True]
    assert statements == ["outbox_lock_runs", "outbox_read_prefixes", "runs_read_array_input_intents",
                          "outbox_lease_facts"]


def test_token_cache__keyed_by_schema_authority_and_receiver():
    launch = {"coordinatorInternalToken": "c", "runtimeApiBaseUrl": "https://a", "executorToken": "ignored"}
    key = authority.token_cache_key("s", launch, "https://a")
    assert key != authority.token_cache_key("s", launch, "https://b")
    assert key != authority.token_cache_key("t", launch, "https://a")
    assert key != authority.token_cache_key("s", {**launch, "coordinatorInternalToken": "d"}, "https://a")
    assert key == authority.token_cache_key("s", {**launch, "executorToken": "other"}, "https://a")


@pytest.mark.requirement("OBX-10")
def test_builtin_receiver__stores_once_by_event_id_and_acknowledges():
    ids = backlog_run("run-b", facts=5)
    assert drainer.run_once("owner").counts["delivered"] == 5
    assert [row[0] for row in query("SELECT event_id FROM run_ledger_events ORDER BY occurred_at")] == ids
    query("UPDATE outbox SET delivered_at = NULL WHERE run_id = 'run-b'")  # a redelivery
    assert drainer.run_once("owner").counts["delivered"] == 5
    assert one("SELECT count(*) FROM run_ledger_events") == 5


def test_ledger_events__invalid_terminal_performance_becomes_a_reason():
    fact = Fact("e", "r", "run.completed", {"terminalRuntimePerformance": {"cpuMs": -1}},
                       dt.datetime(2026, 1, 1, tzinfo=dt.UTC), 0)
    payload = ledger_event(fact)["payload"]
    assert "terminalRuntimePerformance" not in payload
    assert payload["terminalRuntimePerformanceUnavailableReason"] == "invalid_terminal_performance"
    valid = {"cpuMs": 1, "wallMs": 2, "peakMemoryBytes": 3, "attempt": 1}
    fact.payload = {"terminalRuntimePerformance": valid}
    assert ledger_event(fact)["payload"] == {"terminalRuntimePerformance": valid}


@pytest.mark.requirement("TRM-6")
def test_ledger_events__a_null_performance_keeps_the_reason_stored_beside_it():
    """TRM-6: only a present, non-null, invalid value is replaced; an older writer's null and reason pass through."""
    stored = {"terminalRuntimePerformance": None, "terminalRuntimePerformanceUnavailableReason": "invalid_runner_stats"}
    fact = Fact("e", "r", "run.failed", dict(stored), dt.datetime(2026, 1, 1, tzinfo=dt.UTC), 0)
    assert ledger_event(fact)["payload"] == stored


def test_search_lane__acknowledged_without_a_receiver():
    backlog_run("run-q", kinds=["run.progress", "run.progress"], lane="search",
                launch={"runtimeApiBaseUrl": "http://127.0.0.1:9"})
    assert drainer.run_once("owner", lane="search").counts["delivered"] == 2
    assert one("SELECT count(*) FROM run_ledger_events") == 0


@pytest.mark.requirement("OBX-10")
def test_builtin_receiver_endpoint(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    body = {"runId": "r", "events": [{"eventId": "e1", "type": "run.created", "occurredAt": "2026-01-01T00:00:00Z"}]}
    post = lambda data, token="t": client.post("/internal/run-ledger/events", data=json.dumps(data),  # noqa: E731
                                               content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert post(body).json() == {"stored": 1, "received": 1}
    assert post(body).json() == {"stored": 0, "received": 1}
    assert post(body, token="x").status_code == 401
    assert post({"runId": "r", "events": []}).status_code == 400
    assert post({"runId": "r", "events": [{"eventId": "e2", "type": "t", "occurredAt": "nope"}]}).status_code == 400
    assert one("SELECT count(*) FROM run_ledger_events") == 1


@pytest.mark.requirement("OBX-7")
def test_admission_hints__exclusions_apply_before_the_limit():
    """OBX-7: excluding run-1 must not let it crowd out run-3, the next admission in line."""
    backlog_run("run-1", kinds=["run.created"], start_second=1)
    backlog_run("run-2", kinds=["run.progress"], start_second=2)
    backlog_run("run-3", kinds=["run.created"], start_second=3)
    assert claims.admission_hints(1, ["run-1"]) == ["run-3"]


@pytest.mark.requirement("OBX-4")
def test_admission_first__a_class_orders_by_each_heads_own_age__not_its_milestones():
    """OBX-4: with more pending terminals than the listing's limit, the run whose head is oldest comes first, even
    when its terminal is the newest."""
    backlog_run("old-head-new-terminal", kinds=["run.progress", "run.progress", "run.completed"], start_second=1)
    query("UPDATE outbox SET created_at = timestamptz '2026-01-03' WHERE event_id LIKE 'old-head-new-terminal:002:%%'")
    for index in range(12):
        backlog_run(f"t-{index:02d}", kinds=["run.progress", "run.completed"], start_second=100 + index)
    backlog_run("w-older", kinds=["run.progress", "run.waiting"], start_second=0)
    listed = claims.list_ready_runs("ledger", "admission_first", 10)
    assert [row["run_id"] for row in listed][:2] == ["old-head-new-terminal", "t-00"]
    assert {row["class"] for row in listed} == {1}  # the wait (class 2) comes after every pending terminal


@pytest.mark.requirement("OBX-3")
def test_ready__a_live_lease_of_the_listing_drainer_itself_holds_its_runs_lane():
    """OBX-3: a drainer's own live lease blocks its run like any other's: it neither lists nor claims it again."""
    backlog_run("own", kinds=["run.progress", "run.progress"])
    query("UPDATE outbox SET lease_owner = 'me', lease_expires_at = now() + interval '1 hour' "
          "WHERE event_id = 'own:000:run.progress'")
    assert order("admission_first") == order("oldest_ready") == []
    here, leased = drainer.claim(["own"], "me", drainer.DrainOptions(), max_runs=8)
    assert (here, leased) == ([], [])
    assert one("SELECT count(*) FROM outbox WHERE lease_owner = 'me'") == 1


@pytest.mark.requirement("OBX-4")
def test_concurrent_drainers_rotate_only_within_the_listings_first_class():
    """OBX-4: a drainer's own slice comes first only among the top class: no lower-class run before it."""
    listing = [{"run_id": f"t{i}", "class": 1} for i in range(40)] + [{"run_id": f"p{i}", "class": 3} for i in range(24)]
    for owner in [f"host:{pid}:{suffix}" for pid in range(20) for suffix in ("a", "b")]:
        rotated = drainer._own_slice_first(listing, owner, "admission_first")
        assert sorted(rotated[:40]) == sorted(f"t{i}" for i in range(40)) and rotated[40:] == [f"p{i}" for i in range(24)]
    assert {drainer._own_slice_first(listing, f"h:{pid}", "admission_first")[0] for pid in range(20)} == {"t0", "t16"}


@pytest.mark.requirement("OBX-4")
def test_admission_first__with_thousands_of_pending_terminals__still_by_each_heads_own_age():
    """OBX-4 past the bound where every pending terminal's run is not enumerated any more (the head walk)."""
    query("INSERT INTO runs (run_id, org_id, play_name, status, launch_json) "
          "SELECT 'bulk-' || lpad(n::text, 5, '0'), 'org', 'p', 'running', '{}' FROM generate_series(1, 2100) AS n")
    query("INSERT INTO outbox (event_id, run_id, event_type, payload_json, lane, created_at) "
          "SELECT 'bulk-' || lpad(n::text, 5, '0') || ':t', 'bulk-' || lpad(n::text, 5, '0'), 'run.completed', '{}', "
          "'ledger', timestamptz '2026-01-02' + make_interval(secs => n) FROM generate_series(1, 2100) AS n")
    backlog_run("old-head", kinds=["run.progress", "run.completed"], start_second=1)
    query("UPDATE outbox SET created_at = timestamptz '2026-02-01' WHERE event_id = 'old-head:001:run.completed'")
    backlog_run("a-wait", kinds=["run.waiting"], start_second=0)
    listed = claims.list_ready_runs("ledger", "admission_first", 10)
    assert [row["run_id"] for row in listed][:3] == ["old-head", "bulk-00001", "bulk-00002"]
    assert {row["class"] for row in listed} == {1}
    assert [row["run_id"] for row in claims.list_ready_runs("ledger", "oldest_ready", 2)] == ["a-wait", "old-head"]
