"""RCP-1 at scale: a receipt call reads only its own keys' receipts, however many steps its run has, and a held
receipt finds its item without being compared with every other."""

import pytest
from django.db import connection

from scheduler.runs import receipts
from tests.receipts.conftest import caller_of
from tests.support import generic_plan, logged_plans

pytestmark = pytest.mark.django_db

# Every receipt statement that writes (receipts_list_for_run reads a run's receipts by design).
WRITERS = ("receipts_claim", "receipts_complete", "receipts_fail", "receipts_release", "receipts_skip",
           "receipts_mark_queued", "receipts_heartbeat")
LONG_RUN_STEPS = 5_000


@pytest.fixture
def long_run(parked):
    """Many short runs of ten steps each, and the caller's run with thousands of completed steps, analyzed."""
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts)
            SELECT 'short-' || i, 'org', 'p', 'completed', '{}', 1 FROM generate_series(1, 2000) AS i;
            INSERT INTO receipts (run_id, key, status, run_attempt, output_json)
            SELECT 'short-' || i, 'step-' || k, 'completed', 1, '{}' FROM generate_series(1, 2000) AS i,
                   generate_series(1, 10) AS k;
            INSERT INTO receipts (run_id, key, status, run_attempt, output_json)
            SELECT %s, 'done-' || k, 'completed', %s, '{}' FROM generate_series(1, %s) AS k;
            ANALYZE runs; ANALYZE attempts; ANALYZE receipts;
        """, [parked.run_id, parked.attempt, LONG_RUN_STEPS])
    return parked


def receipt_scans(plan: str) -> list[tuple[str, str]]:
    """(scan line, the condition that bounds it) for every scan of the receipts table in an EXPLAIN text."""
    lines = [line.strip() for line in plan.splitlines()]
    scans = []
    for number, line in enumerate(lines):
        if " on receipts " in line and "Scan" in line:
            bound = next((later for later in lines[number + 1:number + 4]
                          if later.startswith(("Index Cond:", "Recheck Cond:"))), "")
            scans.append((line, bound))
    return scans


@pytest.mark.parametrize("name", WRITERS)
def test_generic_plan__a_call_reads_only_its_own_keys_however_many_steps_its_run_has(long_run, name):
    """Joined to the call's keys only through the item list, the generic plan read all of the run's receipts and
    hashed them on every call (5,000 rows for one step of a long play); the keys are an index condition now."""
    scans = receipt_scans(generic_plan(name))
    assert scans and all("key = ANY" in bound for _, bound in scans), scans


def test_a_step_of_a_long_run_reads_only_its_own_receipt(long_run):
    """The same, measured on the calls a play makes: a claim and a completion of one step of the long run read at
    most one receipt in each scan (5,000 before)."""
    caller = caller_of(long_run)
    with logged_plans(analyze=True) as plans:
        [claimed] = receipts.claim(caller, ["next-step"])
        [done] = receipts.complete(caller, [receipts.Item("next-step", claimed.lease_id, {"ok": True})])
    assert done.changed
    rows_read = [int(line.split("(actual")[1].split("rows=")[1].split(".")[0]) for plan in plans
                 for line in plan.splitlines() if " on receipts " in line and "Scan" in line]
    assert rows_read and max(rows_read) <= 1, "\n".join(plans)


def update_subtree(plan: str) -> list[str]:
    """The lines of the `Update on receipts` node of an EXPLAIN text and everything under it."""
    lines = plan.splitlines()
    start = next(number for number, line in enumerate(lines) if "Update on receipts" in line)
    depth = len(lines[start]) - len(lines[start].lstrip())
    subtree = [lines[start]]
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= depth:
            break
        subtree.append(line)
    return subtree


@pytest.mark.parametrize("name", ("receipts_complete", "receipts_fail", "receipts_release", "receipts_skip",
                                  "receipts_heartbeat"))
def test_a_held_receipt_finds_its_item_by_position_not_by_a_join(name):
    """Joined with the item list, the update compared every held receipt with every item: PostgreSQL costs that
    join for one held receipt (100 keys: 9,900 comparisons)."""
    subtree = update_subtree(generic_plan(name))
    assert not [line for line in subtree if "on item" in line], "\n".join(subtree)


def test_a_large_call_answers_in_the_order_it_was_asked(parked):
    caller = caller_of(parked)
    keys = [f"key-{(number * 7919) % 1000:04d}" for number in range(1000)]  # every key once, out of order
    claimed = receipts.claim(caller, keys)
    assert [answer.key for answer in claimed] == keys and all(answer.changed for answer in claimed)
    outputs = {key: {"n": number} for number, key in enumerate(keys)}
    done = receipts.complete(caller, [receipts.Item(answer.key, answer.lease_id, outputs[answer.key])
                                      for answer in claimed])
    assert [answer.key for answer in done] == keys and all(answer.changed for answer in done)
    stored = {row["key"]: row["output"] for row in receipts.receipts_of(parked.run_id)}
    assert stored == outputs
