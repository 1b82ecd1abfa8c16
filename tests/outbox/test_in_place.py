"""OBX-5, OBX-10: a prefix bound for this database is delivered inside its claim's transaction, never leased."""

import threading

import pytest
from django.db import connections

from scheduler.outbox import claims, drainer, receivers, routing
from scheduler.outbox.receivers.interface import ledger_event
from tests.factories import loads, one, query
from tests.outbox.factories import backlog_run


def outbox_writes() -> int:
    """Row versions this transaction wrote into the outbox so far (its own statistics, no other session's)."""
    return one("SELECT pg_stat_get_xact_tuples_updated('outbox'::regclass)")


@pytest.mark.django_db
@pytest.mark.parametrize("lane", ["ledger", "search"])
def test_a_prefix_for_this_database__each_fact_written_once__no_lease(lane):
    backlog_run("run-p", facts=5, lane=lane)
    before = outbox_writes()
    assert drainer.run_once("owner", lane=lane).counts["delivered"] == 5
    # One write per fact, the acknowledgement: a lease would be a second, index-wide one.
    assert outbox_writes() - before == 5
    assert one("SELECT count(*) FROM outbox WHERE delivered_at IS NULL OR lease_owner IS NOT NULL") == 0
    assert one("SELECT count(*) FROM run_ledger_events") == (5 if lane == "ledger" else 0)


@pytest.mark.django_db
def test_a_prefix_for_an_external_receiver__is_still_leased_for_its_delivery():
    backlog_run("run-e", facts=3, launch={"runtimeApiBaseUrl": "http://127.0.0.1:9"})
    here, [prefix] = drainer.claim(["run-e"], "owner", drainer.DrainOptions(), max_runs=8)
    assert here == [] and prefix.leased and prefix.route.kind == "http"
    assert one("SELECT count(*) FROM outbox WHERE lease_owner = 'owner' AND delivered_at IS NULL") == 3


@pytest.mark.django_db
def test_a_run_another_drainer_holds__is_not_delivered_in_place():
    backlog_run("held", facts=3)
    backlog_run("free", facts=3, start_second=10)
    # An older release's drainer leases fact rows; its live lease keeps the run's lane.
    query("UPDATE outbox SET lease_owner = 'older', lease_expires_at = now() + interval '1 hour' "
          "WHERE run_id = 'held' AND event_type = 'run.started'")
    here, leased = drainer.claim(["held", "free"], "owner", drainer.DrainOptions(), max_runs=8)
    assert [(outcome.prefix.run_id, outcome.acknowledged) for outcome in here] == [("free", 3)] and leased == []
    assert [row[0] for row in query("SELECT DISTINCT run_id FROM run_ledger_events")] == ["free"]
    assert one("SELECT count(*) FROM outbox WHERE run_id = 'held' AND delivered_at IS NOT NULL") == 0


@pytest.mark.django_db
def test_a_staged_terminal__leaves_the_database__so_it_is_leased__the_facts_before_it_stay():
    launch = {"arrayInputTerminalRetirementSupported": True,
              "arrayInputTerminalProjectionOrigin": "https://projection.example"}
    ids = backlog_run("staged", facts=3, launch=launch, array_input_started=True)
    # The facts before the terminal go to the built-in receiver in the claim; the terminal is left for its own.
    here, leased = drainer.claim(["staged"], "owner", drainer.DrainOptions(), max_runs=8)
    assert [(outcome.prefix.run_id, outcome.acknowledged) for outcome in here] == [("staged", 2)] and leased == []
    assert one("SELECT count(*) FROM outbox WHERE lease_owner IS NOT NULL") == 0
    here, [prefix] = drainer.claim(["staged"], "owner", drainer.DrainOptions(), max_runs=8)
    assert here == [] and prefix.leased and prefix.fact_ids == ids[2:]
    assert prefix.route.kind == "http" and prefix.route.base_url == "https://projection.example"
    assert one("SELECT count(*) FROM outbox WHERE lease_owner = 'owner'") == 1


@pytest.mark.django_db(transaction=True)
def test_a_store_that_fails_in_place__is_leased_instead__and_the_failure_policy_counts_only_that_run():
    backlog_run("run-x", facts=2)
    backlog_run("run-ok", facts=2, start_second=10)
    query("CREATE FUNCTION refuse_ledger_event() RETURNS trigger LANGUAGE plpgsql AS "
          "$$BEGIN IF NEW.run_id = 'run-x' THEN RAISE EXCEPTION 'ledger refused' USING ERRCODE = '22023'; END IF; "
          "RETURN NEW; END$$")
    query("CREATE TRIGGER refuse_ledger_event BEFORE INSERT ON run_ledger_events "
          "FOR EACH ROW EXECUTE FUNCTION refuse_ledger_event()")
    try:
        tick = drainer.run_once("owner")
    finally:
        query("DROP TRIGGER refuse_ledger_event ON run_ledger_events")
        query("DROP FUNCTION refuse_ledger_event()")
    # Not a tick that fails forever: the head counts an attempt, backs off, and an operator would see it fail.
    assert tick.counts["delivered"] == 2 and tick.counts["retried"] == 1
    assert [row[0] for row in query("SELECT DISTINCT run_id FROM run_ledger_events")] == ["run-ok"]
    assert query("SELECT attempt_count, last_error LIKE '%%ledger refused%%', lease_owner FROM outbox "
                 "WHERE event_id = 'run-x:000:run.created'") == [(1, True, None)]


@pytest.mark.django_db(transaction=True)
def test_drainers_in_place_and_older_leasing_drainers__each_fact_once__in_causal_order():
    """Two drainers deliver in place and two lease as an older release does, behind a barrier, while facts keep
    arriving: every fact reaches the ledger once, and a run's later fact never in an earlier transaction."""
    runs = [f"run-{index:02d}" for index in range(24)]
    for index, run_id in enumerate(runs):
        backlog_run(run_id, facts=9, start_second=index)
    barrier = threading.Barrier(5)
    produced = threading.Event()
    errors = []

    def in_place(owner):
        while not (produced.is_set() and not undelivered()):
            drainer.run_once(owner, batch=20)

    def leasing(owner):
        while not (produced.is_set() and not undelivered()):
            candidates = [row["run_id"] for row in claims.list_ready_runs("ledger", "admission_first", 16)]
            prefixes = claims.claim(candidates, "ledger", owner, lease_seconds=30, max_runs=16) if candidates else []
            assert all(prefix.leased and routing.route(prefix).error is None for prefix in prefixes)
            for outcome in receivers.deliver(prefixes):
                assert outcome.error is None and outcome.acknowledged == len(outcome.prefix.facts)

    def produce():
        for round_ in range(6):
            for index, run_id in enumerate(runs):
                query("INSERT INTO outbox (event_id, run_id, event_type, payload_json, created_at) "
                      "VALUES (%s, %s, 'run.progress', '{}', timestamptz '2026-01-02' + make_interval(secs => %s))",
                      [f"{run_id}:late:{round_}", run_id, round_ * 100 + index])
        produced.set()

    def work(target, *args):
        try:
            barrier.wait()
            target(*args)
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            errors.append(error)
            produced.set()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=args) for args in
               [(in_place, "new-1"), (in_place, "new-2"), (leasing, "old-1"), (leasing, "old-2"), (produce,)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert one("SELECT count(*) FROM run_ledger_events") == one("SELECT count(*) FROM outbox") == 24 * 15
    # A run's next prefix is read only after the last one's acknowledgement committed, so a fact acknowledged in
    # another transaction (the outbox row's xmin) than an earlier fact was acknowledged later (delivered_at is the
    # clock at the acknowledgement). Transaction ids do not say this: a claim takes its id when it locks its runs,
    # which can be before an older release's store of the run's previous prefix took its own.
    out_of_order = query("""
        SELECT fact.event_id FROM outbox AS fact
        WHERE EXISTS (SELECT 1 FROM outbox AS earlier
                      WHERE earlier.run_id = fact.run_id AND earlier.created_at < fact.created_at
                        AND earlier.xmin <> fact.xmin AND earlier.delivered_at > fact.delivered_at)""")
    assert out_of_order == []


def undelivered() -> int:
    return one("SELECT count(*) FROM outbox WHERE delivered_at IS NULL")


@pytest.mark.requirement("TRM-6")
@pytest.mark.django_db
def test_in_place__payloads_reach_the_ledger_as_delivered_over_http__a_terminal_rewritten_by_trm6():
    backlog_run("run-t", kinds=["run.progress", "run.completed"])
    query("UPDATE outbox SET payload_json = %s::jsonb WHERE event_id = 'run-t:000:run.progress'",
          ['{"nested": {"list": [1, "two", null]}, "text": "é"}'])
    query("UPDATE outbox SET payload_json = '{\"terminalRuntimePerformance\": {\"cpuMs\": -1}}' "
          "WHERE event_id = 'run-t:001:run.completed'")
    expected = {fact.event_id: ledger_event(fact)
                for prefix in claims.claim(["run-t"], "ledger", "peek", lease_seconds=30, max_runs=1)
                for fact in prefix.facts}
    query("UPDATE outbox SET lease_owner = NULL, lease_expires_at = NULL")
    assert drainer.run_once("owner").counts["delivered"] == 2
    stored = {event_id: (payload, occurred_at) for event_id, payload, occurred_at in query(
        "SELECT event_id, payload_json, occurred_at FROM run_ledger_events")}
    for event_id, event in expected.items():
        payload, occurred_at = stored[event_id]
        assert loads(payload) == event["payload"]
        assert occurred_at.isoformat().replace("+00:00", "Z") == event["occurredAt"]
    assert loads(stored["run-t:001:run.completed"][0]) == {
        "terminalRuntimePerformanceUnavailableReason": "invalid_terminal_performance"}
