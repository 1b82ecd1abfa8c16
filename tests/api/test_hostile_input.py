"""Hostile and careless requests over every endpoint: a JSON 4xx naming the field, and not one row written."""

import json

import pytest

from scheduler.runs.tokens import mint_runner_token
from tests import factories

pytestmark = pytest.mark.django_db
TOKEN = "internal-test-token"
NUL = "\u0000"
DEEP = '{"playName": "scheduler.plays:hello", "input": ' + "[" * 5000 + "]" * 5000 + "}"
NESTED = {"playName": "scheduler.plays:hello", "input": json.loads("[" * 70 + "]" * 70)}


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def launch(**fields):
    return {"playName": "scheduler.plays:hello", "orgId": "org-1", **fields}


# (method, path, body: dict, raw JSON text, or None) -> (status, error code, field)
CONTROL_CASES = {
    "NUL in playName": ("post", "/internal/runs", launch(playName=f"mod:fn{NUL}"), (400, "invalid_input", "playName")),
    "NUL in orgId": ("post", "/internal/runs", launch(orgId=f"org{NUL}"), (400, "invalid_input", "orgId")),
    "NUL in graphHash": ("post", "/internal/runs", launch(graphHash=NUL), (400, "invalid_input", "graphHash")),
    "NUL in a release id": ("post", "/internal/runs", launch(launch={"absurdReleaseId": f"r{NUL}"}),
                            (400, "invalid_input", "launch.absurdReleaseId")),
    "NUL deep in input": ("post", "/internal/runs", launch(input={"items": [{}, {"name": f"a{NUL}"}]}),
                          (400, "invalid_input", "input.items[1].name")),
    "NaN in input": ("post", "/internal/runs", '{"playName": "scheduler.plays:hello", "input": {"x": NaN}}',
                     (400, "invalid_input", "input.x")),
    "Infinity in input": ("post", "/internal/runs", '{"playName": "scheduler.plays:hello", "input": [1, -Infinity]}',
                          (400, "invalid_input", "input[1]")),
    "1e309 in input": ("post", "/internal/runs", '{"playName": "scheduler.plays:hello", "input": {"big": 1e309}}',
                       (400, "invalid_input", "input.big")),
    "lone surrogate": ("post", "/internal/runs", '{"playName": "scheduler.plays:hello", "input": "\\ud800"}',
                       (400, "invalid_input", "input")),
    "5,000 levels deep": ("post", "/internal/runs", DEEP, (400, "invalid_json", None)),
    "70 levels deep": ("post", "/internal/runs", NESTED, (400, "invalid_input", "input" + "[0]" * 64)),
    "heartbeatTimeoutMs a word": ("post", "/internal/runs", launch(launch={"heartbeatTimeoutMs": "soon"}),
                                  (400, "invalid_input", "launch.heartbeatTimeoutMs")),
    "heartbeatTimeoutMs an object": ("post", "/internal/runs", launch(launch={"heartbeatTimeoutMs": {"ms": 1}}),
                                     (400, "invalid_input", "launch.heartbeatTimeoutMs")),
    "sandboxProvider a list": ("post", "/internal/runs", launch(launch={"sandboxProvider": ["local"]}),
                               (400, "invalid_input", "launch.sandboxProvider")),
    "sandboxProvider unknown": ("post", "/internal/runs", launch(launch={"sandboxProvider": "kubernetes"}),
                                (400, "invalid_input", "launch.sandboxProvider")),
    "runnerApiUrl a number": ("post", "/internal/runs", launch(launch={"runnerApiUrl": 8000}),
                              (400, "invalid_input", "launch.runnerApiUrl")),
    "runnerApiUrl not http": ("post", "/internal/runs", launch(launch={"runnerApiUrl": "ftp://x"}),
                              (400, "invalid_input", "launch.runnerApiUrl")),
    "play command a string": ("post", "/internal/runs", launch(launch={"play": {"command": "ls"}}),
                              (400, "invalid_input", "launch.play.command")),
    "play name not module:function": ("post", "/internal/runs", launch(playName="hello"),
                                      (400, "invalid_input", "playName")),
    "NUL in a cancel reason": ("post", "/internal/runs/run_x/cancel", {"reason": NUL}, (400, "invalid_input", "reason")),
    "cancel body over the limit": ("post", "/internal/runs/run_x/cancel", '{"reason": "' + "x" * (3 * 1024 * 1024) + '"}',
                                   (413, "payload_too_large", None)),
    "NUL in a run id path": ("get", "/internal/runs/run%00x", None, (400, "invalid_input", "runId")),
    "NUL in a cancel path": ("post", "/internal/runs/run%00x/cancel", {}, (400, "invalid_input", "runId")),
    "attempt past int32": ("get", "/internal/runs/run_x/attempts/2147483648/standing", None,
                           (400, "invalid_input", "attempt")),
    "negative attempt": ("get", "/internal/runs/run_x/attempts/-1/standing", None, (400, "invalid_input", "attempt")),
    "NUL in a release path": ("get", "/internal/releases/rel%00/admission", None, (400, "invalid_input", "releaseId")),
    "NUL in a release path (PUT)": ("put", "/internal/releases/rel%00/admission",
                                    {"accepting": False, "admissionEpoch": 1}, (400, "invalid_input", "releaseId")),
    "intent attempt past int32": ("post", "/internal/runs/run_x/array-input-intent", {"orgId": "o", "attempt": 2**31},
                                  (400, "invalid_input", "attempt")),
    "NUL in an intent org": ("post", "/internal/runs/run_x/array-input-intent", {"orgId": NUL, "attempt": 1},
                             (400, "invalid_input", "orgId")),
    "NUL in a ledger event id": ("post", "/internal/run-ledger/events",
                                 {"runId": "r", "events": [{"eventId": NUL, "type": "t", "occurredAt": "2026-01-01T00:00:00Z"}]},
                                 (400, "invalid_input", "events[0].eventId")),
    "NaN in a ledger payload": ("post", "/internal/run-ledger/events",
                                '{"runId": "r", "events": [{"eventId": "e", "type": "t", '
                                '"occurredAt": "2026-01-01T00:00:00Z", "payload": {"v": NaN}}]}',
                                (400, "invalid_input", "events[0].payload.v")),
    "unknown path": ("get", "/internal/nothing-here", None, (404, "unknown_endpoint", None)),
    "trailing slash": ("post", "/internal/runs/", launch(), (404, "unknown_endpoint", None)),
    "slash inside an id": ("get", "/internal/runs/a%2Fb", None, (404, "unknown_endpoint", None)),
    "wrong method": ("delete", "/internal/runs", None, (405, "method_not_allowed", None)),
}


def _send(client, method, path, body, token):
    data = body if isinstance(body, str) else (json.dumps(body) if body is not None else None)
    return getattr(client, method)(path, data=data, content_type="application/json",
                                   HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.mark.parametrize("case", sorted(CONTROL_CASES))
def test_control_endpoints__refused_with_the_field_and_nothing_written(client, case):
    method, path, body, (status, code, field) = CONTROL_CASES[case]
    before = factories.table_state()
    response = _send(client, method, path, body, TOKEN)
    assert response["Content-Type"] == "application/json"
    assert (response.status_code, response.json()["error"], response.json()["field"]) == (status, code, field)
    assert factories.table_state() == before


RUNNER_CASES = {
    "NaN in output": ('{"status": "completed", "output": {"score": NaN}}', "result.output.score"),
    "NUL in output": ({"status": "completed", "output": ["ok", NUL]}, "result.output[1]"),
    "NUL in an error message": ({"status": "failed", "error": {"code": "boom", "message": NUL}}, "result.error.message"),
    "surrogate in an error code": ('{"status": "failed", "error": {"code": "\\udfff", "message": "m"}}', "result.error.code"),
}


@pytest.mark.parametrize("case", sorted(RUNNER_CASES))
def test_runner_terminal__unstorable_result_refused_with_its_path(client, case):
    parked = factories.parked_run()
    result, field = RUNNER_CASES[case]
    identity = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token}
    body = ('{"runId": "%s", "attempt": 1, "leaseToken": "%s", "result": %s}' % (parked.run_id, parked.lease_token, result)
            if isinstance(result, str) else {**identity, "result": result})
    before = factories.table_state()
    response = _send(client, "post", "/internal/runner/terminal", body,
                     mint_runner_token(parked.run_id, 1, parked.lease_token))
    assert (response.status_code, response.json()["field"]) == (400, field)
    assert factories.table_state() == before
