"""RCP-1: claim, complete, fail, release, skip, mark queued and heartbeat, fenced on the caller's current attempt."""

import pytest

from scheduler.kinds import ReceiptOutcome as O
from scheduler.runs import receipts, settlement
from scheduler.runs.receipts import Item
from tests import factories
from tests.factories import one
from tests.receipts.conftest import caller_of, retry

pytestmark = pytest.mark.django_db(transaction=True)


def status_of(run_id, key):
    return one("SELECT status FROM receipts WHERE run_id = %s AND key = %s", [run_id, key])


def test_claim_complete_then_a_later_claim_gets_the_output(parked):
    caller = caller_of(parked)
    [claimed] = receipts.claim(caller, ["charge"])
    assert claimed.outcome == O.CLAIMED and claimed.lease_id and claimed.run_attempt == 1
    [again] = receipts.claim(caller, ["charge"])
    assert again.outcome == O.HELD and again.lease_id is None  # another holder's lease stays secret
    [done] = receipts.complete(caller, [Item("charge", claimed.lease_id, {"charge": "ch_1"})])
    assert (done.outcome, done.changed, done.output) == (O.COMPLETED, True, {"charge": "ch_1"})
    [later] = receipts.claim(caller, ["charge"])
    assert (later.outcome, later.changed, later.output) == (O.COMPLETED, False, {"charge": "ch_1"})


def test_first_write_wins__a_completed_output_is_never_replaced(parked):
    caller = caller_of(parked)
    [claimed] = receipts.claim(caller, ["a"])
    receipts.complete(caller, [Item("a", claimed.lease_id, 1)])
    [second] = receipts.complete(caller, [Item("a", claimed.lease_id, 2)])
    [cached] = receipts.complete(caller, [Item("a", None, 3)])
    assert (second.outcome, second.changed, second.output) == (O.COMPLETED, False, 1)
    assert (cached.outcome, cached.changed, cached.output) == (O.COMPLETED, False, 1)
    assert one("SELECT output_json FROM receipts WHERE run_id = %s AND key = 'a'", [parked.run_id]) == "1"


def test_cache_insert_records_a_completed_receipt_without_a_claim(parked):
    [cached] = receipts.complete(caller_of(parked), [Item("fetched", None, {"rows": 3})], return_output=False)
    assert (cached.outcome, cached.changed, cached.output) == (O.COMPLETED, True, None)
    assert status_of(parked.run_id, "fetched") == "completed"


def test_a_completion_whose_lease_no_longer_holds_is_refused(parked):
    caller = caller_of(parked)
    [claimed] = receipts.claim(caller, ["step"], lease_ms=1000)
    factories.query("UPDATE receipts SET lease_expires_at = now() - interval '1 second' WHERE run_id = %s",
                    [parked.run_id])
    [taken] = receipts.claim(caller, ["step"])
    assert taken.outcome == O.CLAIMED and taken.lease_id != claimed.lease_id
    [late] = receipts.complete(caller, [Item("step", claimed.lease_id, "stale")])
    assert (late.outcome, late.changed) == (O.LOST, False)
    [beat] = receipts.heartbeat(caller, [Item("step", claimed.lease_id)])
    assert beat.outcome == O.LOST


def test_fail__claimable_by_a_later_attempt_unless_final(parked):
    caller = caller_of(parked)
    first, second = receipts.claim(caller, ["soft", "hard"])
    receipts.fail(caller, [Item("soft", first.lease_id, error={"code": "e", "message": "m"}),
                           Item("hard", second.lease_id, error={"code": "e", "message": "m"}, final=True)])
    assert [answer.outcome for answer in receipts.claim(caller, ["soft", "hard"])] == [O.FAILED, O.FAILED]
    retried = retry(parked)
    soft, hard = receipts.claim(caller_of(retried), ["soft", "hard"])
    assert (soft.outcome, soft.run_attempt) == (O.CLAIMED, 2)
    assert (hard.outcome, hard.error["final"]) == (O.FAILED, True)


def test_release_queues_and_skip_is_remembered(parked):
    caller = caller_of(parked)
    [claimed] = receipts.claim(caller, ["x"])
    [released] = receipts.release(caller, [Item("x", claimed.lease_id)])
    assert released.outcome == O.QUEUED and status_of(parked.run_id, "x") == "queued"
    [skipped] = receipts.skip(caller, [Item("y")])
    assert skipped.outcome == O.SKIPPED
    assert [a.outcome for a in receipts.claim(caller, ["x", "y"])] == [O.CLAIMED, O.SKIPPED]


def test_mark_queued_declares_steps_and_leaves_finished_ones(parked):
    caller = caller_of(parked)
    [claimed] = receipts.claim(caller, ["done"])
    receipts.complete(caller, [Item("done", claimed.lease_id, True)])
    answers = receipts.mark_queued(caller, ["done", "next", "later"])
    assert [a.outcome for a in answers] == [O.COMPLETED, O.QUEUED, O.QUEUED]
    assert [row["key"] for row in receipts.receipts_of(parked.run_id)] == ["done", "later", "next"]


def test_heartbeat_extends_only_held_leases(parked):
    caller = caller_of(parked)
    [claimed] = receipts.claim(caller, ["long"], lease_ms=1000)
    [beat] = receipts.heartbeat(caller, [Item("long", claimed.lease_id)], lease_ms=600_000)
    assert beat.outcome == O.EXTENDED and beat.lease_expires_at > claimed.lease_expires_at


def test_an_older_attempts_running_receipt_is_taken_over_at_once(parked):
    [held] = receipts.claim(caller_of(parked), ["s"], lease_ms=600_000)
    retried = retry(parked)
    [taken] = receipts.claim(caller_of(retried), ["s"])
    assert (taken.outcome, taken.run_attempt) == (O.CLAIMED, 2) and taken.lease_id != held.lease_id


def test_a_stale_attempt_is_refused_whole_after_a_newer_attempt(parked):
    receipts.claim(caller_of(parked), ["s"])
    retried = retry(parked)
    receipts.claim(caller_of(retried), ["s"])
    before = factories.table_state()
    for call in (lambda c: receipts.claim(c, ["s"]), lambda c: receipts.complete(c, [Item("s", None, 1)]),
                 lambda c: receipts.mark_queued(c, ["t"])):
        with pytest.raises(receipts.AttemptNotCurrent):
            call(caller_of(parked))
    assert factories.table_state() == before


def test_a_wrong_lease_token_is_fenced(parked):
    with pytest.raises(receipts.AttemptNotCurrent):
        receipts.claim(receipts.Caller(parked.run_id, parked.attempt, "not-the-lease"), ["s"])


def test_a_settled_run_leaves_no_receipt_running(parked):
    caller = caller_of(parked)
    receipts.claim(caller, ["one", "two"])
    settlement.settle_attempt(parked.run_id, parked.attempt, parked.lease_token, factories.completed_result())
    assert factories.query("SELECT key, status, lease_id FROM receipts WHERE run_id = %s ORDER BY key",
                           [parked.run_id]) == [("one", "queued", None), ("two", "queued", None)]
    with pytest.raises(receipts.AttemptNotCurrent):
        receipts.claim(caller, ["three"])


def test_a_completed_receipt_cannot_be_rewritten_even_by_hand(parked):
    caller = caller_of(parked)
    receipts.complete(caller, [Item("k", None, 1)])
    with pytest.raises(Exception, match="keeps its output"):
        factories.query("UPDATE receipts SET output_json = '2' WHERE run_id = %s", [parked.run_id])
