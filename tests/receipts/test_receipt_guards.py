"""RCP-2: `sys:` keys refuse the whole call before the database is touched; batch forms equal single forms."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.runs import receipts
from scheduler.runs.receipts import Item
from tests import factories
from tests.receipts.conftest import caller_of, retry

pytestmark = pytest.mark.django_db(transaction=True)
KEYS = ["a", "b", "sys:billing", "c"]

MUTATING = {
    "claim": lambda c: receipts.claim(c, KEYS),
    "mark_queued": lambda c: receipts.mark_queued(c, KEYS),
    "complete": lambda c: receipts.complete(c, [Item(key, None, 1) for key in KEYS]),
    "fail": lambda c: receipts.fail(c, [Item(key, "lease", error={"code": "x", "message": "y"}) for key in KEYS]),
    "release": lambda c: receipts.release(c, [Item(key, "lease") for key in KEYS]),
    "skip": lambda c: receipts.skip(c, [Item(key) for key in KEYS]),
    "heartbeat": lambda c: receipts.heartbeat(c, [Item(key, "lease") for key in KEYS]),
}


@pytest.mark.requirement("RCP-2")
@pytest.mark.parametrize("name", sorted(MUTATING))
def test_a_sys_key_among_many_refuses_the_whole_call_and_sends_nothing(name):
    parked = factories.parked_run()
    before = factories.table_state()
    with CaptureQueriesContext(connection) as sent, pytest.raises(receipts.ImmutableReceiptKey) as refused:
        MUTATING[name](caller_of(parked))
    assert refused.value.field == "keys[2]" and "sys:billing" in refused.value.message
    assert len(sent) == 0
    assert factories.table_state() == before


def test_reads_see_sys_keys():
    parked = factories.parked_run()
    factories.query("INSERT INTO receipts (run_id, key, status) VALUES (%s, 'sys:billing', 'completed')",
                    [parked.run_id])
    assert [row["key"] for row in receipts.receipts_of(parked.run_id)] == ["sys:billing"]


def _script(caller, batch: bool, leases: dict):
    """The same sequence of calls, each either as one batch or as single calls; the answers, key by key."""
    def call(function, items, **kwargs):
        if batch:
            return function(caller, items, **kwargs)
        return [answer for item in items for answer in function(caller, [item], **kwargs)]

    answers = []
    claimed = call(receipts.claim, ["k1", "k2", "k3", "k4", "k5", "k6"])
    leases.update({answer.key: answer.lease_id for answer in claimed})
    answers += claimed
    answers += call(receipts.claim, ["k1", "k7"])
    answers += call(receipts.complete, [Item("k1", leases["k1"], {"v": 1}), Item("k2", "not-mine", 2),
                                        Item("k8", None, [8])])
    answers += call(receipts.fail, [Item("k3", leases["k3"], error={"code": "e", "message": "m"}),
                                    Item("k1", leases["k1"], error={"code": "e", "message": "m"})])
    answers += call(receipts.release, [Item("k4", leases["k4"]), Item("k4x", "nope")])
    answers += call(receipts.skip, [Item("k5", leases["k5"]), Item("k9")])
    answers += call(receipts.heartbeat, [Item("k6", leases["k6"]), Item("k2", "not-mine")])
    answers += call(receipts.mark_queued, ["k1", "k10", "k6"])
    answers += call(receipts.claim, ["k1", "k3", "k4", "k5", "k8", "k9", "k10"])
    return answers


def _comparable(answer):
    return (answer.key, answer.outcome, answer.status, answer.changed, answer.lease_id is not None,
            answer.run_attempt, answer.output, answer.error)


def test_batch_forms_equal_their_single_forms_item_by_item():
    single_run, batch_run = factories.parked_run(), factories.parked_run()
    single = _script(caller_of(single_run), False, {})
    batched = _script(caller_of(batch_run), True, {})
    assert [_comparable(a) for a in single] == [_comparable(a) for a in batched]
    after_retry = [receipts.claim(caller_of(retry(run)), ["k2", "k3", "k6"]) for run in (single_run, batch_run)]
    assert [_comparable(a) for a in after_retry[0]] == [_comparable(a) for a in after_retry[1]]
