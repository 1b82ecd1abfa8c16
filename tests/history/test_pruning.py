"""RET-1..4: pruning removes whole finished runs past retention, and only those whose obligations are met."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from scheduler.cleanup import obligations
from scheduler.conf import scheduler_settings
from scheduler.history import pruning
from scheduler.kinds import HeldReason
from scheduler.periodic import definitions
from tests import factories
from tests.factories import one, query
from tests.history.seeds import RUN_TABLES, finished_run, rows_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def retention(settings):
    settings.SCHEDULER_RETENTION_DAYS = 30
    settings.SCHEDULER_BILLING_RETENTION_DAYS = 400


@pytest.mark.requirement("RET-1")
def test_a_finished_run_past_retention_goes_with_every_row_of_its_own():
    """RET-1: attempts, facts, receipts, late results, control keys, cleanup rows, tombstones and events, legacy
    rows, the billing job and ledger events: gone in one statement; the schedule fire stays, unlinked."""
    schedule = definitions.create(definitions.ScheduleSpec("org-old", "nightly", "0 3 * * *", "UTC",
                                                           {"playName": "tests.plays:hello"}))
    old = finished_run("run-old", 31, schedule_id=schedule["schedule_id"])
    recent = finished_run("run-recent", 29)
    tick = pruning.run_once()
    assert tick.counts["runs"] == 1 and tick.counts["fires_unlinked"] == 1
    assert rows_of(old) == dict.fromkeys(RUN_TABLES, 0)
    assert one("SELECT count(*) FROM control WHERE key = 'runtime_cancel:run-old'") == 0
    assert one("SELECT run_id FROM schedule_fires WHERE schedule_id = %s", [schedule["schedule_id"]]) is None
    assert all(count > 0 for count in rows_of(recent).values())  # not yet past retention: untouched
    assert one("SELECT count(*) FROM billing_items") == 2  # RET-2: billing items keep their own clock


@pytest.mark.requirement("RET-1")
@pytest.mark.parametrize("obligation,reason,by_hand", [
    ({"fact_delivered": False}, HeldReason.UNDELIVERED_FACTS,
     "UPDATE outbox SET delivered_at = now() WHERE run_id = 'run-held' AND delivered_at IS NULL"),
    ({"cleanup": "pending"}, HeldReason.CLEANUP_PENDING,
     "UPDATE sandbox_cleanup_jobs_v2 SET status = 'deleted', deleted_at = now() WHERE run_id = 'run-held'"),
    ({"legacy": "pending"}, HeldReason.CLEANUP_PENDING,
     "UPDATE sandbox_cleanup_jobs SET status = 'deleted', deleted_at = now() WHERE run_id = 'run-held'"),
    ({"billing": "pending"}, HeldReason.BILLING_UNFINALIZED,
     "UPDATE compute_billing_jobs_v2 SET status = 'finalized', finalized_at = now() WHERE run_id = 'run-held'"),
])
def test_an_open_obligation_keeps_the_run_whole__and_counts_it_held(obligation, reason, by_hand):
    """RET-1: kept, every row, and counted held by its reason; once the obligation is met by hand, it is pruned."""
    finished_run("run-held", 60, **obligation)
    before = rows_of("run-held")
    assert pruning.run_once().counts["runs"] == 0
    assert rows_of("run-held") == before
    held = pruning.held()
    assert held[reason] == 1 and sum(held.values()) == 1
    assert pruning.held_run_ids(reason) == ["run-held"]
    query(by_hand)
    assert pruning.held()[reason] == 0
    assert pruning.run_once().counts["runs"] == 1
    assert rows_of("run-held") == dict.fromkeys(RUN_TABLES, 0)


@pytest.mark.requirement("CLN-1", "RET-1")
def test_an_unreconciled_attempt_keeps_its_run():
    """RET-1 (CLN-1): an attempt that never parked may have left a sandbox; its control key holds the run."""
    finished_run("run-unparked", 60)
    query("INSERT INTO control (key, value_json) VALUES ('sandbox_unreconciled:run-unparked:1', '{}')")
    assert pruning.run_once().counts["runs"] == 0
    assert pruning.held()[HeldReason.CLEANUP_PENDING] == 1
    query("DELETE FROM control WHERE key = 'sandbox_unreconciled:run-unparked:1'")
    assert pruning.run_once().counts["runs"] == 1


@pytest.mark.requirement("RET-1")
def test_open_runs_are_never_pruned():
    """RET-1: queued, running and waiting runs stay, however old."""
    queued = factories.launch()
    parked = factories.parked_run()
    query("UPDATE runs SET created_at = now() - interval '1 year', finished_at = now() - interval '1 year'")
    assert pruning.run_once(retention=pruning.Retention(0, 0)).counts["runs"] == 0
    assert one("SELECT count(*) FROM runs WHERE run_id IN (%s, %s)", [queued, parked.run_id]) == 2


@pytest.mark.requirement("RET-1")
def test_older_than_days_zero_prunes_every_finished_run_whose_obligations_are_met():
    """RET-1: the one-off override (`prune_history --once --older-than-days 0`)."""
    finished_run("run-today", 0.001)
    assert pruning.run_once().counts["runs"] == 0
    assert pruning.run_once(retention=pruning.Retention(0, 400)).counts["runs"] == 1


@pytest.mark.requirement("RET-3")
def test_batches_are_bounded_and_a_full_batch_goes_again():
    """RET-3: at most `batch` runs a statement; while batches are full the tick asks to go again after a pause as
    long as itself, seven times (an eighth of a core at most), and an idle tick waits its interval."""
    for number in range(5):
        finished_run(f"run-b{number}", 40 + number)
    first = pruning.run_once(batch=2)
    assert first.counts["runs"] == 2 and not first.again and 0 < first.due_in < 60
    assert [pruning.run_once(batch=2).counts["runs"] for _ in range(2)] == [2, 1]
    assert pruning.run_once(batch=2).due_in is None
    assert one("SELECT count(*) FROM runs") == 0
    # The oldest first: the last one left was the newest.


@pytest.mark.requirement("RET-3")
def test_the_loop_sizes_each_statement_to_its_budget_within_the_batch(monkeypatch):
    """RET-3: `--batch` is the most a statement takes; the loop takes fewer when that many would outlast the
    statement budget (the runners' commits feel one long statement), never fewer than ten, and back up to the
    batch when statements are quick."""
    for number in range(45):
        finished_run(f"run-s{number:02}", 40)
    pruner = pruning.Pruner(ceiling=20, retention=pruning.Retention(30, 400))
    monkeypatch.setattr(pruning, "STATEMENT_BUDGET_MS", 1e-9)  # any statement is too long
    assert pruner.tick().counts["runs"] == 20 and pruner.batch == pruning.SMALLEST_BATCH
    tick = pruner.tick()
    assert tick.counts["runs"] == 10 and tick.counts["batch"] == 10
    monkeypatch.setattr(pruning, "STATEMENT_BUDGET_MS", 1e9)  # any statement is quick
    assert pruner.batch == 10 and pruner.tick().counts["runs"] == 10 and pruner.batch == 20
    assert pruner.tick().counts["runs"] == 5
    assert one("SELECT count(*) FROM runs") == 0


@pytest.mark.requirement("RET-3")
def test_a_pass_walks_the_held_runs_once__a_run_freed_behind_it_waits_for_the_next_pass():
    """RET-3: each batch of the loop starts after the last run the batch before it picked, so runs held past
    retention at the head of the finished index are walked once a pass, not once a batch; a pass ends with a batch
    that is not full, and the next starts from the oldest run again."""
    finished_run("run-a-held", 90, fact_delivered=False)
    for number in range(5):
        finished_run(f"run-p{number}", 80 - number)
    pruner = pruning.Pruner(ceiling=2, retention=pruning.Retention(30, 400))
    assert pruner.tick().counts["runs"] == 2 and pruner.after[1] == "run-p1"
    query("UPDATE outbox SET delivered_at = now() WHERE run_id = 'run-a-held' AND delivered_at IS NULL")
    assert pruner.tick().counts["runs"] == 2 and pruner.after[1] == "run-p3"  # behind the pass: not yet
    assert one("SELECT count(*) FROM runs WHERE run_id = 'run-a-held'") == 1
    assert pruner.tick().counts["runs"] == 1 and pruner.after is None  # the pass is over
    assert pruner.tick().counts["runs"] == 1
    assert one("SELECT count(*) FROM runs") == 0


@pytest.mark.requirement("RET-2")
def test_billing_items_are_pruned_on_their_own_clock():
    """RET-2: items older than SCHEDULER_BILLING_RETENTION_DAYS go, whether or not their run is still there."""
    finished_run("run-billed", 500, fact_delivered=False)  # held: its item is still older than 400 days
    finished_run("run-recent-bill", 100)
    tick = pruning.run_once()
    assert tick.counts["billing_items"] == 1
    assert one("SELECT run_id FROM billing_items") == "run-recent-bill"
    assert one("SELECT count(*) FROM runs WHERE run_id = 'run-billed'") == 1


@pytest.mark.requirement("RET-4")
def test_adoption_after_pruning_recreates_no_obligation():
    """RET-4: the pruned run's legacy row and tombstone are gone together; adoption finds nothing to copy."""
    finished_run("run-adopted", 45)
    assert pruning.run_once().counts["runs"] == 1
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs") == 0
    obligations.adopt()
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2") == 0


@pytest.mark.requirement("RET-4")
def test_outside_the_prune_a_tombstone_or_an_event_still_cannot_be_deleted():
    """RET-4: the guards let only the prune's transaction delete them."""
    finished_run("run-guarded", 45)
    for statement in ("DELETE FROM sandbox_cleanup_jobs_v2", "DELETE FROM sandbox_cleanup_events_v2",
                      "DELETE FROM sandbox_cleanup_jobs"):
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)


@pytest.mark.requirement("RET-3")
def test_a_locked_run_is_skipped_not_waited_for():
    """RET-3: SKIP LOCKED on the run rows: a run another transaction holds is left for a later tick."""
    from tests.support import connect

    finished_run("run-locked", 45)
    finished_run("run-free", 46)
    with connect() as other:
        other.execute(f"SELECT 1 FROM {scheduler_settings.schema}.runs WHERE run_id = 'run-locked' FOR UPDATE")
        tick = pruning.run_once()
        assert (tick.counts["runs"], tick.counts["skipped_locked"]) == (1, 1)
    assert pruning.run_once().counts["runs"] == 1
