"""SCD-7 over HTTP: create, list, read with recent fires, change, pause, resume, delete; bad input is a 400 naming
the field and writes nothing; the commands preview and add."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests import factories
from tests.factories import one

pytestmark = pytest.mark.django_db
TOKEN = "internal-test-token"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
BODY = {"orgId": "org-s", "name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
        "launchTemplate": {"playName": "tests.plays:fail"}, "overlap": "skip", "catchUp": "latest"}


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def call(client, method, path, body=None):
    response = getattr(client, method)(path, data=json.dumps(body) if body is not None else None,
                                       content_type="application/json", **AUTH)
    return response.status_code, response.json()


@pytest.mark.requirement("SCD-7")
def test_scd7__create_read_list_change_pause_resume_delete(client):
    status, created = call(client, "post", "/internal/schedules", BODY)
    assert status == 201 and created["nextFireAt"].endswith(("00:30:00Z", "01:30:00Z"))
    sid = created["scheduleId"]
    status, read = call(client, "get", f"/internal/schedules/{sid}")
    assert status == 200 and read["recentFires"] == [] and read["cron"] == "30 2 * * *"
    assert [row["scheduleId"] for row in call(client, "get", "/internal/schedules?org=org-s")[1]["schedules"]] == [sid]
    assert call(client, "get", "/internal/schedules?org=other")[1]["schedules"] == []
    status, changed = call(client, "patch", f"/internal/schedules/{sid}", {"cron": "@hourly", "overlap": "allow"})
    assert status == 200 and changed["cron"] == "0 * * * *" and changed["overlap"] == "allow"
    assert call(client, "post", f"/internal/schedules/{sid}/pause")[1]["paused"] is True
    assert call(client, "post", f"/internal/schedules/{sid}/resume")[1]["paused"] is False
    assert call(client, "delete", f"/internal/schedules/{sid}") == (200, {"scheduleId": sid, "deleted": True})
    assert call(client, "get", f"/internal/schedules/{sid}")[0] == 404


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("change,field", [
    ({"cron": "*/0 * * * *"}, "cron"), ({"timezone": "Nowhere/City"}, "timezone"), ({"cron": None}, "cron"),
    ({"launchTemplate": {"playName": "not a callable"}}, "launchTemplate.playName"), ({"overlap": 3}, "overlap"),
    ({"catchUp": "everything"}, "catchUp"), ({"paused": "no"}, "paused"), ({"every": "hour"}, "every")])
def test_scd7__a_bad_schedule__400_naming_the_field__nothing_written(client, change, field):
    before = factories.table_state()
    count = one("SELECT count(*) FROM schedules")
    status, answer = call(client, "post", "/internal/schedules", {**BODY, **change})
    assert status == 400 and answer["field"] == field, answer
    assert factories.table_state() == before and one("SELECT count(*) FROM schedules") == count


@pytest.mark.requirement("SCD-7")
def test_scd7__a_missing_field_and_a_taken_name(client):
    status, answer = call(client, "post", "/internal/schedules", {k: v for k, v in BODY.items() if k != "cron"})
    assert status == 400 and answer["field"] == "cron"
    assert call(client, "post", "/internal/schedules", BODY)[0] == 201
    status, answer = call(client, "post", "/internal/schedules", BODY)
    assert status == 409 and answer["error"] == "schedule_exists"


@pytest.mark.requirement("SCD-7")
def test_scd7__the_schedules_command__add_then_preview_across_the_spring_change(capsys):
    call_command("schedules", "add", "--org", "org-s", "--name", "n", "--cron", "30 2 * * *",
                 "--timezone", "Europe/Berlin", "--template", json.dumps({"playName": "tests.plays:fail"}))
    schedule_id = capsys.readouterr().out.split()[0]
    call_command("schedules", "preview", schedule_id, "--next", "3", "--after", "2027-03-27T00:00:00Z")
    assert capsys.readouterr().out.split() == ["2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"]
    call_command("schedules", "pause", schedule_id)
    call_command("schedules", "list", "--org", "org-s")
    assert "paused" in capsys.readouterr().out
    with pytest.raises(CommandError, match="cron"):
        call_command("schedules", "add", "--org", "org-s", "--name", "m", "--cron", "nope", "--template", "{}")


@pytest.mark.requirement("SCD-7")
def test_scd7__scheduler_up_runs_the_schedule_loop():
    from scheduler.stack.supervisor import worker_children

    loops = {child.name: child.argv for child in worker_children()}
    assert "run_schedules" in loops["schedules"]


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("cron", ["0 0 */40 * 1#5", "0 0 */31 * 5L"])
def test_scd7__a_cron_that_never_fires__400_on_create_and_change(client, cron):
    status, answer = call(client, "post", "/internal/schedules", {**BODY, "cron": cron})
    assert (status, answer["field"]) == (400, "cron")
    sid = call(client, "post", "/internal/schedules", BODY)[1]["scheduleId"]
    status, answer = call(client, "patch", f"/internal/schedules/{sid}", {"cron": cron})
    assert (status, answer["field"]) == (400, "cron")
    assert one("SELECT cron FROM schedules WHERE schedule_id = %s", [sid]) == "30 2 * * *"


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("path,field", [
    ("/internal/schedules?org=%00", "org"), ("/internal/schedules?org=%20org-s", "org"),
    ("/internal/schedules?limit=0", "limit"), ("/internal/schedules?limit=%C2%B2", "limit"),
    ("/internal/schedules?cursor=nonsense", "cursor"), ("/internal/schedules?orgs=org-s", "orgs"),
    ("/internal/runs?org=%00", "org")])
def test_scd7__every_query_parameter_is_checked(client, path, field):
    status, answer = call(client, "get", path)
    assert (status, answer["field"]) == (400, field), answer


@pytest.mark.requirement("SCD-7")
@pytest.mark.parametrize("suffix", ["pause", "resume"])
@pytest.mark.parametrize("spelled", ["%20{sid}", "{sid}%09", "{sid}%FF"])
def test_scd7__a_path_id_that_is_not_the_id_is_refused_before_anything_is_written(client, suffix, spelled):
    sid = call(client, "post", "/internal/schedules", BODY)[1]["scheduleId"]
    before = factories.table_state()
    status, answer = call(client, "post", f"/internal/schedules/{spelled.format(sid=sid)}/{suffix}")
    assert status == 400 and answer["field"] == "scheduleId", answer
    assert factories.table_state() == before


@pytest.mark.requirement("SCD-7")
def test_scd7__one_rule_for_an_org_id_everywhere(client):
    """An org id a launch accepts is one its limits and its schedules accept, and the other way round."""
    longest = "o" * 256
    assert call(client, "post", "/internal/runs", {"playName": "tests.plays:fail", "orgId": longest})[0] == 201
    assert call(client, "put", f"/internal/orgs/{longest}/limits", {"maxActive": 3})[0] == 200
    assert call(client, "post", "/internal/schedules", {**BODY, "orgId": longest})[0] == 201
    for too_long in ("o" * 257, " org-s"):
        assert call(client, "post", "/internal/runs", {"playName": "tests.plays:fail", "orgId": too_long})[0] == 400
        assert call(client, "post", "/internal/schedules", {**BODY, "orgId": too_long})[0] == 400
    assert call(client, "put", "/internal/orgs/org%FF/limits", {"maxActive": 3})[1]["field"] == "orgId"


@pytest.mark.requirement("SCD-7")
def test_scd7__the_schedule_key_namespace_is_the_schedules_own(client):
    status, answer = call(client, "post", "/internal/runs", {"playName": "tests.plays:fail", "orgId": "org-s",
                                                             "idempotencyKey": "schedule:sch_1:2027-01-01T00:00:00Z"})
    assert (status, answer["field"]) == (400, "idempotencyKey")


@pytest.mark.requirement("SCD-7")
def test_scd7__the_list_pages_with_a_cursor(client):
    made = sorted(call(client, "post", "/internal/schedules", {**BODY, "name": f"s{index:03d}"})[1]["scheduleId"]
                  for index in range(7))
    seen, cursor = [], None
    while True:
        status, page = call(client, "get", "/internal/schedules?org=org-s&limit=3" + (f"&cursor={cursor}" if cursor
                                                                                      else ""))
        assert status == 200 and len(page["schedules"]) <= 3
        seen += [row["scheduleId"] for row in page["schedules"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(seen) == made and len(seen) == 7
