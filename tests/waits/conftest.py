"""Durable waits (WAIT): a parked run whose play began a wait and suspended on it, through the production calls."""

from __future__ import annotations

import pytest

from scheduler.kinds import WaitKind
from scheduler.runs.receipts import Caller
from scheduler.runs.settlement import Settlement
from scheduler.waits import suspension
from tests import factories

SUSPENDED = {"status": "suspended", "wait": {"key": "approval"}}


def begin(parked: factories.Parked, key: str = "approval", kind: WaitKind = WaitKind.EVENT, name: str | None = "approved",
          delay_ms: float | None = None) -> suspension.WaitAnswer:
    caller = Caller(parked.run_id, parked.attempt, parked.lease_token)
    return suspension.begin(caller, suspension.Wait(key, kind, name if kind == WaitKind.EVENT else None, delay_ms))


def post_suspended(parked: factories.Parked, key: str = "approval"):
    item = Settlement(parked.run_id, parked.attempt, parked.lease_token, {"status": "suspended", "wait": {"key": key}},
                      from_runner=True)
    return suspension.suspend(item, key)


def suspended_run(kind: WaitKind = WaitKind.EVENT, name: str | None = "approved", delay_ms: float | None = None,
                  **launch) -> factories.Parked:
    """A run parked on attempt 1 whose play waits for `name` (or a timer) and has suspended: it now waits durably."""
    parked = factories.parked_run(**launch)
    assert begin(parked, kind=kind, name=name, delay_ms=delay_ms).outcome == "suspend"
    answer = post_suspended(parked)
    assert answer.run_status == "waiting", answer
    return parked


def resumed_attempt(run_id: str) -> factories.Parked:
    """Claim and park the run's next attempt (its first, or the one that resumes it) in a sandbox of its own, with its
    billing resource, as the dispatcher does."""
    import datetime as dt

    from scheduler.runs import lifecycle

    claimed = factories.claim(run_id)
    # A local sandbox id naming no process (past any pid), so the cleanup loop finds it gone and confirms it.
    sandbox_id = f"local-{2**30 + claimed.attempt}-{int(run_id[-12:], 16)}"
    ref = {"provider": "local", "sandboxId": sandbox_id, "routingDomain": None}
    started_ms = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    resource = {**ref, "billingStartedAt": started_ms, "cpu": 1, "memoryMb": 512}
    assert lifecycle.park(run_id, claimed.attempt, claimed.lease_token, ref, heartbeat_timeout_ms=30_000,
                          started_at_ms=started_ms, resource=resource)
    return factories.Parked(run_id, claimed.attempt, claimed.lease_token, ref["sandboxId"])


@pytest.fixture
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "wait-tests-token"
    return {"HTTP_AUTHORIZATION": "Bearer wait-tests-token"}
