"""OBX-4 (issue 47): a drainer's lane survey and ready listing run their generic forms (planned once per
connection) only while the outbox's statistics still describe it, and are planned with their values on every
call once a backlog has outgrown them: a generic listing costed for an empty outbox once took 105 s to list 16
runs of a 50,000-fact backlog that arrived before the next analyze. The production statements throughout; which
one ran is observed, the database is real."""

import logging
import math
import time

import psycopg
import pytest

from scheduler import db
from scheduler.kinds import HeadPriority, Lane
from scheduler.outbox import claims, drainer
from tests.factories import one, query
from tests.outbox.factories import backlog_run

pytestmark = pytest.mark.django_db
SURVEY = {"lane": Lane.LEDGER, "bound": claims.ENUMERATION_BOUND, "admission_first": True}


def unseen_backlog(facts: int = 5000, tag: str = "unseen") -> None:
    """Ready facts of 500 runs written after the last ANALYZE: the outbox grows several times past its statistics."""
    query("""INSERT INTO outbox (event_id, run_id, event_type, payload_json)
             SELECT %s || '-' || i, 'unseen-run-' || (i %% 500), 'run.progress', '{"n": 1}'
             FROM generate_series(1, %s) AS i""", [tag, facts])


@pytest.fixture
def analyzed_outbox():
    """An outbox whose statistics describe it (a table of its own: earlier tests' rolled-back rows gone)."""
    query("TRUNCATE runs, outbox CASCADE")
    backlog_run("seen", facts=2)
    query("ANALYZE outbox")


@pytest.mark.requirement("OBX-4")
@pytest.mark.parametrize("survey", ["outbox_survey_lane", "outbox_survey_lane_generic"])
def test_the_survey_finds_the_statistics_fit__until_a_backlog_outgrows_them__and_again_after_an_analyze(
        analyzed_outbox, survey):
    assert db.fetch_one(survey, SURVEY)["statistics_fit"] is True
    unseen_backlog()
    assert db.fetch_one(survey, SURVEY)["statistics_fit"] is False
    query("ANALYZE outbox")
    assert db.fetch_one(survey, SURVEY)["statistics_fit"] is True


@pytest.mark.requirement("OBX-4")
def test_a_drainer_plans_its_looks_per_call_while_a_backlog_outgrows_the_statistics(analyzed_outbox, monkeypatch):
    ran: list[str] = []
    real = db.run
    monkeypatch.setattr(db, "run", lambda name, *args, **kwargs: ran.append(name) or real(name, *args, **kwargs))
    monkeypatch.setattr(claims._Statistics, "fit", False)  # a process's first look

    def look() -> list[str]:
        ran.clear()
        assert claims.list_ready_runs(Lane.LEDGER, HeadPriority.ADMISSION_FIRST, 8)
        return list(ran)

    # The first look's survey is planned per call; it finds the statistics fit, so its listing is the generic one,
    # and so is every later look's survey.
    assert look() == ["outbox_survey_lane", "outbox_list_ready_runs_generic"]
    assert look() == ["outbox_survey_lane_generic", "outbox_list_ready_runs_generic"]
    unseen_backlog()
    # The survey finds the outbox outgrown: this look's listing is planned with its values, and so is every later
    # look's survey, until an analyze brings statistics that describe the outbox again.
    assert look() == ["outbox_survey_lane_generic", "outbox_list_ready_runs"]
    assert look() == ["outbox_survey_lane", "outbox_list_ready_runs"]
    query("ANALYZE outbox")
    assert look() == ["outbox_survey_lane", "outbox_list_ready_runs_generic"]


@pytest.mark.requirement("OBX-4")
def test_the_generic_listing_answers_as_the_custom_one(analyzed_outbox):
    unseen_backlog(600)
    query("ANALYZE outbox")
    params = {"lane": Lane.LEDGER, "admission_first": True, "limit": 64, "exclude_run_ids": ["unseen-run-7"],
              "enumerate_terminals": False, "walk_terminals": False, "enumerate_waits": False, "walk_waits": False}
    for admission_first in (True, False):
        params["admission_first"] = admission_first
        assert db.fetch_all("outbox_list_ready_runs_generic", params) == db.fetch_all("outbox_list_ready_runs", params)


def outbox_pages() -> int:
    return one("SELECT relpages FROM pg_class WHERE oid = 'outbox'::regclass")


@pytest.fixture
def first_look(monkeypatch):
    """A drainer process before its first look: nothing known of the statistics, never analyzed."""
    monkeypatch.setattr(claims._Statistics, "fit", False)
    monkeypatch.setattr(claims._Statistics, "may_analyze", None)
    monkeypatch.setattr(claims._Statistics, "next_try_at", -math.inf)


@pytest.mark.requirement("OBX-4")
def test_a_drainer_analyzes_an_outbox_grown_past_its_statistics__once_an_interval(analyzed_outbox, first_look,
                                                                                   monkeypatch, caplog):
    # The backlog's runs do not exist: each tick lists them, locks none and delivers nothing.
    unseen_backlog()
    seen = outbox_pages()
    with caplog.at_level(logging.INFO, logger="scheduler.drain"):
        drainer.run_once("drainer-a")
    assert outbox_pages() > 2 * seen + 8, "the tick analyzed the outbox: its statistics count the backlog"
    assert [record.getMessage().split(" in ")[0] for record in caplog.records] == [
        "drain drainer-a: the outbox had grown past its statistics; analyzed it"]
    assert db.fetch_one("outbox_survey_lane", SURVEY)["statistics_fit"] is True
    counted = outbox_pages()
    unseen_backlog(20000, tag="later")
    drainer.run_once("drainer-a")  # finds the outbox outgrown again, within the interval: not analyzed
    assert claims._Statistics.fit is False and outbox_pages() == counted
    monkeypatch.setattr(claims._Statistics, "next_try_at", claims._Statistics.next_try_at - claims.ANALYZE_INTERVAL)
    drainer.run_once("drainer-a")
    assert outbox_pages() > counted


@pytest.mark.requirement("OBX-4")
def test_a_drainer_whose_statistics_fit_analyzes_nothing(analyzed_outbox, first_look):
    seen = outbox_pages()
    query("UPDATE pg_class SET relpages = relpages + 1 WHERE oid = 'outbox'::regclass")  # a mark an analyze rewrites
    drainer.run_once("drainer-a")
    assert claims._Statistics.fit is True and outbox_pages() == seen + 1


@pytest.mark.requirement("OBX-4")
def test_a_role_that_may_not_analyze_the_outbox_leaves_it_to_autovacuum(analyzed_outbox, first_look):
    unseen_backlog()
    query("CREATE ROLE scheduler_test_drainer NOLOGIN")
    query("GRANT USAGE ON SCHEMA %s TO scheduler_test_drainer" % one("SELECT current_schema()"))
    query("GRANT SELECT ON outbox TO scheduler_test_drainer")
    query("SET LOCAL ROLE scheduler_test_drainer")
    try:
        assert db.fetch_value("outbox_may_analyze") is False
        assert claims.analyze_outgrown_outbox("drainer-a") is False
    finally:
        query("RESET ROLE")
    assert claims._Statistics.may_analyze is False
    assert db.fetch_value("outbox_may_analyze") is True  # this test's own role owns it


def failing_function() -> None:
    """A real way for ANALYZE to fail: it evaluates an expression index for its statistics, and this index's
    function raises once the session's scheduler_test.fail is on (plpgsql: never inlined, so every caller meets it)."""
    query("""CREATE FUNCTION scheduler_test_analyzed(text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN
             IF current_setting('scheduler_test.fail', true) = 'on' THEN RAISE EXCEPTION 'analyzed'; END IF;
             RETURN $1; END $$""")


@pytest.mark.requirement("OBX-4")
@pytest.mark.django_db(transaction=True)  # as the drain loop runs: no transaction around the tick
def test_an_analyze_that_fails_fails_no_tick__and_waits_long_before_the_next(analyzed_outbox, first_look, caplog):
    failing_function()
    try:
        query("CREATE INDEX scheduler_test_analyzed_idx ON outbox (scheduler_test_analyzed(event_id))")
        # Nothing this tick may write to the outbox (a write would meet the function too): the only run's facts
        # are leased elsewhere, and the backlog's runs do not exist.
        query("UPDATE outbox SET lease_owner = 'elsewhere', lease_expires_at = now() + interval '1 hour'")
        unseen_backlog()
        query("SET scheduler_test.fail = 'on'")
        with caplog.at_level(logging.WARNING, logger="scheduler.drain"):
            tick = drainer.run_once("drainer-a")  # returns: the failure is not the tick's
        assert tick.counts["claimed"] == 0
        assert [record.getMessage().split(": ")[1] for record in caplog.records] == [
            "analyzing the outbox failed, left to autovacuum for 600 s"]
        waited = claims._Statistics.next_try_at - time.monotonic()
        assert claims.ANALYZE_RETRY_AFTER_ERROR - claims.ANALYZE_INTERVAL - 60 < waited
        assert claims.analyze_outgrown_outbox("drainer-a") is False  # within that wait: not tried again
    finally:
        query("RESET scheduler_test.fail")
        query("DROP INDEX IF EXISTS scheduler_test_analyzed_idx")
        query("DROP FUNCTION scheduler_test_analyzed(text)")


@pytest.mark.requirement("OBX-4")
def test_an_analyze_that_fails_inside_a_transaction_is_the_callers_to_see(analyzed_outbox, first_look):
    failing_function()
    query("CREATE INDEX scheduler_test_analyzed_idx ON outbox (scheduler_test_analyzed(event_id))")
    query("SET LOCAL scheduler_test.fail = 'on'")
    query("SAVEPOINT before_analyze")
    with pytest.raises(psycopg.Error, match="analyzed"):
        # Its transaction is aborted: hiding that would fail its next statement.
        claims.analyze_outgrown_outbox("drainer-a")
    query("ROLLBACK TO SAVEPOINT before_analyze")
