"""GET /internal/runs and list_runs: newest first, filtered, keyset pages; run_status prints the whole snapshot."""

import json

import pytest

from tests import factories
from tests.factories import query
from tests.support import current_database_url, run_manage

pytestmark = pytest.mark.django_db
TOKEN = "internal-test-token"


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def _get(client, query_string=""):
    response = client.get(f"/internal/runs{query_string}", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return response.status_code, response.json()


def test_list__newest_first__filtered__paged_by_cursor(client):
    ids = [factories.launch(org_id="org-a" if i % 2 else "org-b", launch={"absurdReleaseId": "rel-l"}) for i in range(5)]
    for offset, run_id in enumerate(ids):
        query("UPDATE runs SET created_at = now() - %s * interval '1 minute' WHERE run_id = %s", [5 - offset, run_id])
    status, first = _get(client, "?limit=2")
    assert status == 200 and [run["runId"] for run in first["runs"]] == [ids[4], ids[3]]
    status, second = _get(client, f"?limit=2&cursor={first['nextCursor']}")
    assert [run["runId"] for run in second["runs"]] == [ids[2], ids[1]]
    status, last = _get(client, f"?limit=2&cursor={second['nextCursor']}")
    assert [run["runId"] for run in last["runs"]] == [ids[0]] and last["nextCursor"] is None
    status, org_a = _get(client, "?org=org-a&release=rel-l&status=queued")
    assert {run["runId"] for run in org_a["runs"]} == {ids[1], ids[3]}


@pytest.mark.parametrize("query_string,field", [
    ("?status=lost", "status"), ("?limit=0", "limit"), ("?limit=1000", "limit"), ("?cursor=%00", "cursor"),
    ("?cursor=bm9wZQ", "cursor"), ("?created_after=yesterday", "created_after"), ("?org=%00", "org"),
])
def test_list__bad_query__400_naming_the_field(client, query_string, field):
    status, body = _get(client, query_string)
    assert (status, body["field"]) == (400, field)


def test_status__output_verdicts_and_delivery(client):
    parked = factories.parked_run(max_attempts=1)
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.failed_result("play_failed", "boom"))
    body = client.get(f"/internal/runs/{parked.run_id}", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    assert body["error"] == {"code": "play_failed", "message": "boom"}
    assert [attempt["verdict"] for attempt in body["attempts"]] == ["play_failed"]
    assert body["delivery"] == {"facts": 4, "delivered": 0, "failedHeads": 0}  # created, started, waiting, failed


@pytest.mark.django_db(transaction=True)
def test_commands__list_runs_and_run_status():
    run_id = factories.launch(play_name="scheduler.plays:hello")
    listed = run_manage("list_runs", "--status", "queued", database_url_value=current_database_url())
    assert listed.returncode == 0 and listed.stdout.startswith(f"{run_id} queued scheduler.plays:hello")
    shown = run_manage("run_status", run_id, database_url_value=current_database_url())
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "queued"
    missing = run_manage("run_status", "run_missing", database_url_value=current_database_url())
    assert missing.returncode == 1 and missing.stderr.strip() == "CommandError: run run_missing not found"
