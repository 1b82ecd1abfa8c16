"""Issue 47: the queue tables' inserts leave room on each page for the versions their updates write (0046)."""

from importlib import import_module

import pytest

from tests.factories import one, query
from tests.outbox.factories import backlog_run, claim_one

pytestmark = pytest.mark.django_db

MIGRATION = import_module("scheduler.migrations.0046_room_for_updates")


@pytest.mark.parametrize("table", sorted(MIGRATION.FILLFACTORS))
def test_each_queue_table_leaves_room_on_its_pages(table):
    options = one("SELECT reloptions FROM pg_class WHERE oid = %s::regclass", [table]) or []
    assert f"fillfactor={MIGRATION.FILLFACTORS[table]}" in options
    assert MIGRATION.FILLFACTORS[table] <= 80


@pytest.mark.requirement("OBX-5")
def test_a_fact_on_a_page_its_neighbours_filled__is_still_leased_by_a_hot_update():
    # An empty outbox (this test's transaction only), so the pages hold exactly the facts written here: the first
    # run's five facts open page 0, and the runs after it fill that page as far as its inserts may.
    query("TRUNCATE outbox")
    for number in range(40):
        backlog_run(f"run-room-{number:02d}", facts=5, start_second=number)
    assert one("SELECT count(DISTINCT (ctid::text::point)[0]) FROM outbox") > 2
    first_pages = query("SELECT DISTINCT (ctid::text::point)[0]::int FROM outbox WHERE run_id = 'run-room-00'")
    assert first_pages == [(0,)]
    hot = one("SELECT pg_stat_get_xact_tuples_hot_updated('outbox'::regclass)")
    prefix = claim_one("ledger", "owner-room")
    assert prefix.run_id == "run-room-00" and len(prefix.fact_ids) == 5
    assert one("SELECT pg_stat_get_xact_tuples_hot_updated('outbox'::regclass)") == hot + 5
