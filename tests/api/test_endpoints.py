"""The internal API: auth, bad input, unknown ids, conflicts, happy paths; refusals write nothing."""

import json

import pytest

from scheduler.runs import admission
from scheduler.runs.tokens import mint_runner_token
from tests import factories
from tests.factories import one

pytestmark = pytest.mark.django_db
TOKEN = "internal-test-token"


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def control(client, method, path, body=None, token=TOKEN, raw=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    data = raw if raw is not None else (json.dumps(body) if body is not None else "")
    return getattr(client, method)(path, data=data, content_type="application/json", **headers)


def runner(client, path, parked, body=None, token=None):
    body = body if body is not None else {"runId": parked.run_id, "attempt": parked.attempt, "leaseToken": parked.lease_token}
    token = token or mint_runner_token(parked.run_id, parked.attempt, parked.lease_token)
    return client.post(path, data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def refused(response, status, error=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error", "message", "field"} and body["message"]
    if error:
        assert body["error"] == error
    return body


# --- launch ---------------------------------------------------------------

def test_launch__happy_path__201_with_run_id(client):
    response = control(client, "post", "/internal/runs", {"playName": "scheduler.plays:hello", "orgId": "o", "input": [1]})
    assert response.status_code == 201
    run_id = response.json()["runId"]
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"


@pytest.mark.parametrize("token", [None, "wrong", ""])
def test_launch__missing_or_wrong_token__401_and_nothing_written(client, token):
    before = factories.table_state()
    refused(control(client, "post", "/internal/runs", {"playName": "scheduler.plays:hello"}, token=token), 401, "unauthorized")
    assert factories.table_state() == before


def test_control__unset_internal_token__closed(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = ""
    refused(control(client, "post", "/internal/runs", {"playName": "scheduler.plays:hello"}, token="anything"), 401)


@pytest.mark.parametrize("raw,error", [
    ("not json", "invalid_json"),
    ("[1, 2]", "invalid_input"),
    (json.dumps({"orgId": "o"}), "invalid_input"),
    (json.dumps({"playName": 7}), "invalid_input"),
    (json.dumps({"playName": "scheduler.plays:hello", "maxAttempts": "3"}), "invalid_input"),
])
def test_launch__bad_body__400_and_nothing_written(client, raw, error):
    before = factories.table_state()
    refused(control(client, "post", "/internal/runs", raw=raw), 400, error)
    assert factories.table_state() == before


def test_launch__oversized_body__413_and_nothing_written(client):
    before = factories.table_state()
    big = json.dumps({"playName": "scheduler.plays:hello", "input": "x" * (1024 * 1024)})
    refused(control(client, "post", "/internal/runs", raw=big), 413, "payload_too_large")
    assert factories.table_state() == before


def test_launch__closed_release__409_and_nothing_written(client):
    admission.set_admission("rel", False, 3)
    before = factories.table_state()
    refused(control(client, "post", "/internal/runs", {"playName": "scheduler.plays:hello", "launch": {"absurdReleaseId": "rel"}}),
            409, "release_closed")
    assert factories.table_state() == before


def test_wrong_method__405(client):
    assert control(client, "delete", "/internal/runs").status_code == 405  # GET lists runs since the list API


# --- status, cancel, standing, intent --------------------------------------

def test_status__happy_404_and_include(client):
    run_id = factories.launch(definition_scope="system", launch={"coordinatorInternalToken": "hush"})
    body = control(client, "get", f"/internal/runs/{run_id}").json()
    assert body["runId"] == run_id and "definitionScope" not in body and "hush" not in json.dumps(body)
    assert control(client, "get", f"/internal/runs/{run_id}?include=definitionScope").json()["definitionScope"] == "system"
    refused(control(client, "get", f"/internal/runs/{run_id}?include=launch"), 400)
    refused(control(client, "get", "/internal/runs/run_missing"), 404, "not_found")
    refused(control(client, "get", f"/internal/runs/{run_id}", token="x"), 401)


def test_cancel__202_then_404_for_unknown(client):
    run_id = factories.launch()
    response = control(client, "post", f"/internal/runs/{run_id}/cancel")
    assert response.status_code == 202 and response.json()["cancelledNow"] is True
    before = factories.table_state()
    refused(control(client, "post", "/internal/runs/run_missing/cancel"), 404)
    refused(control(client, "post", f"/internal/runs/{run_id}/cancel", raw="{"), 400)
    refused(control(client, "post", f"/internal/runs/{run_id}/cancel", token="nope"), 401)
    assert factories.table_state() == before


def test_standing__happy_and_404(client):
    parked = factories.parked_run()
    body = control(client, "get", f"/internal/runs/{parked.run_id}/attempts/1/standing").json()
    assert body == {"runStatus": "waiting", "attemptStatus": "waiting", "superseded": False}
    refused(control(client, "get", "/internal/runs/run_missing/attempts/1/standing"), 404)
    refused(control(client, "get", f"/internal/runs/{parked.run_id}/attempts/1/standing", token=None), 401)


def test_array_input_intent__happy_400_404_401(client):
    parked = factories.parked_run(org_id="org-a")
    path = f"/internal/runs/{parked.run_id}/array-input-intent"
    before = factories.table_state()
    refused(control(client, "post", path, {"orgId": "org-a", "attempt": "1"}), 400)
    refused(control(client, "post", path, {"attempt": 1}), 400)
    refused(control(client, "post", "/internal/runs/run_missing/array-input-intent", {"orgId": "org-a", "attempt": 1}), 404)
    refused(control(client, "post", path, {"orgId": "org-a", "attempt": 1}, token="bad"), 401)
    assert factories.table_state() == before
    assert control(client, "post", path, {"orgId": "org-a", "attempt": 1}).json() == {"registered": True}


# --- runner endpoints ------------------------------------------------------

def test_heartbeat__happy_path(client):
    parked = factories.parked_run()
    body = runner(client, "/internal/runner/heartbeat", parked).json()
    assert body["current"] is True and body["cancelRequested"] is False and body["heartbeatIdentity"].endswith("Z")


def test_runner_endpoints__token_of_another_run_attempt_or_lease__401_and_nothing_written(client):
    parked, other = factories.parked_run(), factories.parked_run()
    before = factories.table_state()
    for path in ("/internal/runner/heartbeat", "/internal/runner/terminal"):
        body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token,
                "result": factories.completed_result()}
        for token in (
            mint_runner_token(other.run_id, 1, other.lease_token),
            mint_runner_token(parked.run_id, 2, parked.lease_token),
            mint_runner_token(parked.run_id, 1, "another-lease"),
            TOKEN,
            mint_runner_token(parked.run_id, 1, parked.lease_token)[:-2] + "AA",
        ):
            refused(runner(client, path, parked, body, token=token), 401, "unauthorized")
        refused(client.post(path, data=json.dumps(body), content_type="application/json"), 401)
    assert factories.table_state() == before


def test_terminal__happy_path__recorded_and_settled(client):
    parked = factories.parked_run()
    body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token,
            "result": factories.completed_result({"answer": 42}), "terminalProgressEvents": [{"step": "done"}]}
    response = runner(client, "/internal/runner/terminal", parked, body)
    assert response.json() == {"recorded": True, "settled": True, "runStatus": "completed"}
    assert one("SELECT count(*) FROM outbox WHERE run_id = %s AND event_type = 'run.progress'", [parked.run_id]) == 1


@pytest.mark.parametrize("mutate", [
    lambda b: b.pop("result"),
    lambda b: b.update(result={"status": "done"}),
    lambda b: b.update(result={"status": "failed"}),
    lambda b: b.update(result={"status": "failed", "error": {"message": "no code"}}),
    lambda b: b.update(terminalProgressEvents="nope"),
    lambda b: b.update(attempt="1"),
    lambda b: b.update(attempt=True),
])
def test_terminal__bad_body__400_and_nothing_written(client, mutate):
    parked = factories.parked_run()
    body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token, "result": factories.completed_result()}
    mutate(body)
    before = factories.table_state()
    refused(runner(client, "/internal/runner/terminal", parked, body), 400)
    assert factories.table_state() == before


def test_terminal__unknown_attempt__404_and_lease_mismatch__409(client):
    parked = factories.parked_run()
    before = factories.table_state()
    ghost = {"runId": parked.run_id, "attempt": 4, "leaseToken": parked.lease_token, "result": factories.completed_result()}
    refused(runner(client, "/internal/runner/terminal", parked, ghost,
                   token=mint_runner_token(parked.run_id, 4, parked.lease_token)), 404)
    stale = {"runId": parked.run_id, "attempt": 1, "leaseToken": "stale-lease", "result": factories.completed_result()}
    refused(runner(client, "/internal/runner/terminal", parked, stale,
                   token=mint_runner_token(parked.run_id, 1, "stale-lease")), 409, "lease_mismatch")
    assert factories.table_state() == before


def test_terminal__oversized_body__413(client):
    parked = factories.parked_run()
    body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token,
            "result": factories.completed_result("y" * (1024 * 1024 + 10))}
    before = factories.table_state()
    refused(runner(client, "/internal/runner/terminal", parked, body), 413)
    assert factories.table_state() == before


# --- release admission -----------------------------------------------------

def test_release_admission__set_read_and_unknown(client):
    refused(control(client, "get", "/internal/releases/rel-9/admission"), 404)
    response = control(client, "put", "/internal/releases/rel-9/admission",
                       {"accepting": False, "admissionEpoch": 4, "environment": "production"})
    assert response.json() == {"releaseId": "rel-9", "accepting": False, "admissionEpoch": 4}
    assert control(client, "get", "/internal/releases/rel-9/admission?environment=production").json()["accepting"] is False


@pytest.mark.parametrize("epoch", [1.5, 2.0, "3", True, None, -1, 2**53, [1]])
def test_release_admission__bad_epoch__400_and_nothing_written(client, epoch):
    before = factories.table_state()
    refused(control(client, "put", "/internal/releases/rel/admission", {"accepting": True, "admissionEpoch": epoch}),
            400, "invalid_admission_epoch")
    assert factories.table_state() == before


def test_release_admission__refused_opening__409_and_nothing_written(client):
    admission.set_admission("rel", False, 9, "preview")
    before = factories.table_state()
    refused(control(client, "put", "/internal/releases/rel/admission",
                    {"accepting": True, "admissionEpoch": 3, "environment": "preview"}), 409, "opening_refused")
    assert factories.table_state() == before


def test_release_admission__bad_environment_and_auth(client):
    before = factories.table_state()
    refused(control(client, "put", "/internal/releases/rel/admission",
                    {"accepting": True, "admissionEpoch": 1, "environment": "staging"}), 400)
    refused(control(client, "put", "/internal/releases/rel/admission", {"accepting": "yes", "admissionEpoch": 1}), 400)
    refused(control(client, "put", "/internal/releases/rel/admission", {"accepting": True, "admissionEpoch": 1}, token="x"), 401)
    assert factories.table_state() == before


def test_domain_errors_carry_no_http_status__the_api_maps_each_kind():
    from scheduler import errors
    from scheduler.api.http import status_of

    kinds = [errors.InvalidInput, errors.Unauthorized, errors.NotFound, errors.Conflict, errors.ReleaseClosed,
             errors.OpeningRefused, errors.LeaseMismatch, errors.PayloadTooLarge]
    assert [kind for kind in kinds if "status" in vars(kind)] == []
    assert [status_of(kind("m")) for kind in kinds] == [400, 401, 404, 409, 409, 409, 409, 413]
