"""RCP-1 under real concurrency: two holders race for one key; a claim races its run's settlement."""

import pytest

from scheduler.kinds import ReceiptOutcome as O
from scheduler.runs import receipts, settlement
from scheduler.runs.receipts import Item
from tests import factories
from tests.concurrency import threads
from tests.receipts.conftest import caller_of

pytestmark = pytest.mark.django_db(transaction=True)
TRIALS = 50


def test_two_claimers_of_one_key__exactly_one_runs_the_step():
    for _ in range(TRIALS):
        parked = factories.parked_run()
        caller = caller_of(parked)
        first, second = threads.run_together(lambda: receipts.claim(caller, ["charge"])[0],
                                             lambda: receipts.claim(caller, ["charge"])[0])
        outcomes = sorted([first.get().outcome, second.get().outcome])
        assert outcomes == [O.CLAIMED, O.HELD], outcomes


def test_a_claim_racing_the_runs_settlement_never_leaves_a_receipt_running():
    """Either the claim is fenced (settled first) or the settlement releases the receipt it committed."""
    fenced = 0
    for _ in range(TRIALS):
        parked = factories.parked_run()
        caller = caller_of(parked)

        def claim():
            try:
                return receipts.claim(caller, ["step"])[0].outcome
            except receipts.AttemptNotCurrent:
                return "fenced"

        def settle():
            return settlement.settle_attempt(parked.run_id, 1, parked.lease_token, factories.completed_result())

        claimed, settled = threads.run_together(claim, settle)
        assert settled.get().run_status == "completed"
        fenced += claimed.get() == "fenced"
        assert factories.one("SELECT count(*) FROM receipts WHERE run_id = %s AND status = 'running'",
                             [parked.run_id]) == 0
    assert 0 <= fenced <= TRIALS


def test_a_stale_holders_completion_races_a_takeover__one_output_kept():
    for _ in range(TRIALS):
        parked = factories.parked_run()
        caller = caller_of(parked)
        [stale] = receipts.claim(caller, ["s"], lease_ms=1000)
        factories.query("UPDATE receipts SET lease_expires_at = now() WHERE run_id = %s", [parked.run_id])

        def take_over_and_complete():
            [taken] = receipts.claim(caller, ["s"])
            if taken.outcome != O.CLAIMED:
                return None  # the stale holder's completion landed first: held or completed, nothing written
            return receipts.complete(caller, [Item("s", taken.lease_id, "new")])[0]

        late, fresh = threads.run_together(
            lambda: receipts.complete(caller, [Item("s", stale.lease_id, "old")])[0], take_over_and_complete)
        writes = [answer for answer in (late.get(), fresh.get()) if answer is not None and answer.changed]
        stored = factories.loads(factories.one("SELECT output_json FROM receipts WHERE run_id = %s", [parked.run_id]))
        assert len(writes) == 1 and stored == writes[0].output
        assert all(answer.output == stored for answer in (late.get(), fresh.get())
                   if answer is not None and answer.outcome == O.COMPLETED)


def test_a_settlement_waits_for_an_uncommitted_claim_then_releases_its_receipt():
    """The claim holds the run's share lock until it commits; the settlement waits, then its trigger sees the row."""
    import threading

    from django.db import transaction

    parked = factories.parked_run()
    caller = caller_of(parked)
    claimed, may_commit = threading.Event(), threading.Event()

    def claim_and_hold():
        with transaction.atomic():
            answer = receipts.claim(caller, ["step"])[0]
            claimed.set()
            may_commit.wait(30)
        return answer.outcome

    holder = threads.start(claim_and_hold)
    assert claimed.wait(30)
    settler = threads.start(lambda: settlement.settle_attempt(parked.run_id, 1, parked.lease_token,
                                                              factories.completed_result()),
                            application_name="receipt-settler")
    threads.wait_until_blocked("receipt-settler")
    may_commit.set()
    for thread, _ in (holder, settler):
        thread.join(60)
    assert holder[1].get() == O.CLAIMED and settler[1].get().run_status == "completed"
    assert factories.query("SELECT status, lease_id FROM receipts WHERE run_id = %s", [parked.run_id]) == [
        ("queued", None)]
