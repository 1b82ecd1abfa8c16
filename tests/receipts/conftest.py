import pytest

from scheduler.runs import lifecycle, receipts, settlement
from tests import factories


def caller_of(parked) -> receipts.Caller:
    return receipts.Caller(parked.run_id, parked.attempt, parked.lease_token)


def retry(parked) -> factories.Parked:
    """Attempt n is judged runner_lost (retryable); attempt n+1 is claimed and parked."""
    settled = settlement.settle_attempt(parked.run_id, parked.attempt, parked.lease_token,
                                        factories.failed_result("runner_lost", "gone"))
    assert settled.run_status == "queued", settled
    claimed = factories.claim(parked.run_id)
    assert lifecycle.park(parked.run_id, claimed.attempt, claimed.lease_token,
                          {"provider": "local", "sandboxId": f"sb-{claimed.attempt}"},
                          heartbeat_timeout_ms=30_000, started_at_ms=0)
    return factories.Parked(parked.run_id, claimed.attempt, claimed.lease_token, f"sb-{claimed.attempt}")


@pytest.fixture
def parked():
    return factories.parked_run()
