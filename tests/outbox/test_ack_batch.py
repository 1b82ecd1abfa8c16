"""OBX-6 (issue 47): the facts a claim's receivers took are acknowledged in one statement, each fenced on its own
lease: a prefix whose lease another drainer took meanwhile stays that drainer's, the others are delivered."""

import pytest

from scheduler import db
from scheduler.kinds import Lane
from scheduler.outbox import claims, routing, settle
from scheduler.outbox.receivers.interface import Outcome
from tests.factories import query
from tests.outbox.factories import backlog_run

pytestmark = pytest.mark.django_db


@pytest.mark.requirement("OBX-6")
def test_one_acknowledgement_for_a_claim__a_stolen_lease_refused_alone(monkeypatch):
    for index in range(3):
        backlog_run(f"run-{index}", facts=3, start_second=index, launch={"runtimeApiBaseUrl": "https://ledger.test"})
    prefixes = claims.claim(["run-0", "run-1", "run-2"], Lane.LEDGER, "owner", lease_seconds=30, max_runs=3)
    for prefix in prefixes:
        routing.route(prefix)
    assert [prefix.run_id for prefix in prefixes] == ["run-0", "run-1", "run-2"]
    # Its lease lapsed while the receiver answered, and another drainer took the run.
    query("UPDATE outbox SET lease_owner = 'another' WHERE run_id = 'run-1'")
    statements: list[str] = []
    real = db.fetch_all
    monkeypatch.setattr(db, "fetch_all", lambda name, *args, **kwargs: statements.append(name) or real(name, *args, **kwargs))
    counts = {"delivered": 0, "released": 0, "failed_heads": 0, "retried": 0}

    whole = settle.settle_all([Outcome(prefix, delivered=prefix.facts) for prefix in prefixes],
                              settle.FailurePolicy(max_attempts=5, backoff_base_ms=1000), counts)

    assert statements == ["outbox_ack"]
    assert whole == [True, True, True] and counts["delivered"] == 6
    assert dict(query("SELECT run_id, count(*) FILTER (WHERE delivered_at IS NOT NULL) FROM outbox GROUP BY run_id")) \
        == {"run-0": 3, "run-1": 0, "run-2": 3}
    assert query("SELECT DISTINCT lease_owner FROM outbox WHERE run_id = 'run-1'") == [("another",)]
