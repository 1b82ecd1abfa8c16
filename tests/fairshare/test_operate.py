"""FSH-9 (why a queued run waits) and FSH-10 (operate an org's limits) through the HTTP API and the command."""

import datetime as dt
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduler.fairshare import limits
from scheduler.runs.lifecycle import Concurrency
from tests import factories
from tests.factories import one, query

TOKEN = "internal-test-token"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def because(client, run_id):
    return client.get(f"/internal/runs/{run_id}", **AUTH).json().get("queuedBecause")


@pytest.mark.requirement("FSH-9")
@pytest.mark.django_db
def test_fsh9__a_queued_run_says_why_it_waits__and_the_list_filters_by_it(client):
    turn = factories.launch(org_id="org-turn")
    later = factories.launch(org_id="org-later", run_after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    paused = factories.launch(org_id="org-paused")
    limits.change("org-paused", limits.LimitsChange(paused=True), actor="test")
    capped = factories.launch(org_id="org-capped")
    limits.change("org-capped", limits.LimitsChange(max_active=0), actor="test")
    rated = factories.launch(org_id="org-rated")
    limits.change("org-rated", limits.LimitsChange(max_starts_per_minute=0), actor="test")
    keyed = [factories.launch(org_id="org-keyed", concurrency=Concurrency("k", 1)) for _ in range(2)]
    query("UPDATE runs SET status = 'running' WHERE run_id = %s", [keyed[0]])
    assert {run_id: because(client, run_id) for run_id in (turn, later, paused, capped, rated, keyed[1])} == {
        turn: "turn", later: "not_before", paused: "paused", capped: "org_limit", rated: "rate_limit",
        keyed[1]: "concurrency_key"}
    assert because(client, keyed[0]) is None  # not queued: no reason
    listed = client.get("/internal/runs?queued_because=org_limit", **AUTH).json()["runs"]
    assert [(row["runId"], row["queuedBecause"]) for row in listed] == [(capped, "org_limit")]
    refused = client.get("/internal/runs?queued_because=soon", **AUTH)
    assert refused.status_code == 400 and refused.json()["field"] == "queued_because"


@pytest.mark.requirement("FSH-10")
@pytest.mark.django_db
def test_fsh10__get_and_put_an_orgs_limits__null_clears__audited(client):
    factories.launch(org_id="org-a")
    answer = client.get("/internal/orgs/org-a/limits", **AUTH).json()
    assert answer == {"orgId": "org-a", "maxActive": None, "maxStartsPerMinute": None, "paused": False,
                      "weight": 1, "reason": None, "active": 0, "queued": 1}
    put = client.put("/internal/orgs/org-a/limits", data=json.dumps({"maxActive": 5, "paused": True,
                                                                      "reason": "flooding"}),
                     content_type="application/json", **AUTH)
    assert put.status_code == 200 and put.json() == {**answer, "maxActive": 5, "paused": True, "reason": "flooding"}
    cleared = client.put("/internal/orgs/org-a/limits", data=json.dumps({"maxActive": None}),
                         content_type="application/json", **AUTH).json()
    assert cleared["maxActive"] is None and cleared["paused"] is True  # omitted fields keep their values
    assert query("SELECT actor, action, target, changed FROM operator_actions ORDER BY id") == [
        ("api:internal-token", "org_limits_set", "org:org-a", True),
        ("api:internal-token", "org_limits_set", "org:org-a", True)]


@pytest.mark.requirement("FSH-10")
@pytest.mark.django_db
@pytest.mark.parametrize("body,field", [
    ({"maxActive": -1}, "maxActive"), ({"maxActive": 1.5}, "maxActive"), ({"maxActive": "3"}, "maxActive"),
    ({"maxStartsPerMinute": True}, "maxStartsPerMinute"), ({"paused": "yes"}, "paused"),
    ({"reason": "a\u0000b"}, "reason"), ({"maxActve": 3}, "maxActve"), ([], None), ({"weight": 0}, "weight"),
    ({"weight": 1001}, "weight"), ({"weight": 2.5}, "weight")])
def test_fsh10__a_bad_limits_body__400_naming_the_field__nothing_written(client, body, field):
    before = factories.table_state()
    response = client.put("/internal/orgs/org-a/limits", data=json.dumps(body), content_type="application/json",
                          **AUTH)
    assert response.status_code == 400 and response.json()["field"] == field, response.json()
    assert factories.table_state() == before


@pytest.mark.requirement("FSH-10")
@pytest.mark.django_db
def test_fsh10__the_limits_need_the_internal_token(client):
    assert client.get("/internal/orgs/org-a/limits").status_code == 401


@pytest.mark.requirement("FSH-10")
@pytest.mark.django_db
def test_fsh10__the_org_limits_command__show_set_pause_resume(capsys):
    call_command("org_limits", "set", "org-a", "--max-active", "4", "--max-starts-per-minute", "60")
    call_command("org_limits", "pause", "org-a", "--reason", "incident 7")
    call_command("org_limits", "show", "org-a")
    assert capsys.readouterr().out.splitlines()[-1] == (
        "org-a: paused, max active 4, max starts/min 60, weight 1, 0 active, 0 queued (incident 7)")
    call_command("org_limits", "resume", "org-a")
    call_command("org_limits", "set", "org-a", "--max-active", "none")
    assert one("SELECT max_active, max_starts_per_minute, paused FROM org_limits") == (None, 60, False)
    assert [row[0] for row in query("SELECT action FROM operator_actions ORDER BY id")] == [
        "org_limits_set", "org_limits_pause", "org_limits_resume", "org_limits_set"]
    with pytest.raises(CommandError, match="pause takes only --reason"):
        call_command("org_limits", "pause", "org-a", "--max-active", "3")


@pytest.mark.django_db
@pytest.mark.parametrize("field,value", [
    ("priority", 101), ("priority", "1"), ("concurrency", {"key": "k"}), ("concurrency", {"key": "k", "limit": 0}),
    ("concurrency", {"key": "", "limit": 1}), ("concurrency", {"key": "k", "limit": 1, "x": 1}),
    ("runAfter", "tomorrow"), ("runAfter", "2027-01-01T00:00:00")])
def test_new_launch_fields__refused_at_the_edge_naming_the_field__nothing_written(client, field, value):
    before = factories.table_state()
    response = client.post("/internal/runs", data=json.dumps({"playName": "m:f", field: value}),
                           content_type="application/json", **AUTH)
    assert response.status_code == 400 and response.json()["field"].startswith(field), response.json()
    assert factories.table_state() == before


@pytest.mark.django_db
def test_new_launch_fields__stored_on_the_run(client):
    body = {"playName": "m:f", "orgId": "org-a", "priority": -7, "concurrency": {"key": "repo-1", "limit": 3},
            "runAfter": "2027-03-28T02:30:00+01:00"}
    run_id = client.post("/internal/runs", data=json.dumps(body), content_type="application/json", **AUTH).json()["runId"]
    assert one("SELECT priority, concurrency_key, concurrency_limit, run_after = '2027-03-28T01:30:00Z' "
               "FROM runs WHERE run_id = %s", [run_id]) == (-7, "repo-1", 3, True)


@pytest.mark.requirement("FSH-11")
@pytest.mark.django_db
def test_fsh11__an_orgs_weight__set_read_and_audited_through_the_api_and_the_command(client, capsys):
    put = client.put("/internal/orgs/org-a/limits", data=json.dumps({"weight": 3}), content_type="application/json",
                     **AUTH)
    assert put.status_code == 200 and put.json()["weight"] == 3
    call_command("org_limits", "set", "org-a", "--weight", "5")
    call_command("org_limits", "show", "org-a")
    assert "weight 5" in capsys.readouterr().out
    assert client.put("/internal/orgs/org-a/limits", data=json.dumps({"weight": None}),
                      content_type="application/json", **AUTH).json()["weight"] == 1
    assert [row[0] for row in query("SELECT outcome FROM operator_actions ORDER BY id")][-1].endswith("weight=1")
    with pytest.raises(CommandError):
        call_command("org_limits", "set", "org-a", "--weight", "0")
