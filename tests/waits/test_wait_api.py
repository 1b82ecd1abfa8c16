"""WAIT-1, WAIT-3 over HTTP: the event endpoint and the play's wait step; every refusal names its field and writes
nothing."""

import json

import pytest

from scheduler.runs import lifecycle
from scheduler.runs.tokens import mint_runner_token
from tests import factories
from tests.api.test_endpoints import refused
from tests.factories import one
from tests.waits.conftest import suspended_run

pytestmark = pytest.mark.django_db
TOKEN = "wait-api-token"


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def post_event(client, run_id, body=None, token=TOKEN, raw=None):
    data = raw if raw is not None else json.dumps(body)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(f"/internal/runs/{run_id}/events", data=data, content_type="application/json", **headers)


def begin_wait(client, parked, **fields):
    body = {"runId": parked.run_id, "attempt": parked.attempt, "leaseToken": parked.lease_token, **fields}
    token = mint_runner_token(parked.run_id, parked.attempt, parked.lease_token)
    return client.post("/internal/runner/waits/begin", data=json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.mark.requirement("WAIT-3")
def test_an_event_resumes_its_waiting_run_and_a_repeat_is_harmless(client):
    parked = suspended_run()
    body = {"name": "approved", "payload": {"by": "ann"}, "eventId": "e-1"}
    first = post_event(client, parked.run_id, body)
    assert (first.status_code, first.json()) == (201, {"eventId": "e-1", "stored": True, "resumed": True})
    again = post_event(client, parked.run_id, body)
    assert (again.status_code, again.json()) == (200, {"eventId": "e-1", "stored": False, "resumed": False})
    assert one("SELECT count(*) FROM run_events") == 1


def test_an_event_without_an_id_gets_one(client):
    run_id = factories.launch()
    answer = post_event(client, run_id, {"name": "approved"})
    assert answer.status_code == 201 and answer.json()["eventId"]


@pytest.mark.requirement("WAIT-3")
@pytest.mark.parametrize("case", ["unknown run", "wrong token", "no token", "no name", "nul in payload",
                                  "lone surrogate in name", "NaN payload", "oversized body", "unknown field",
                                  "another payload for the id", "finished run", "id too long", "bad run id"])
def test_bad_events_are_refused_with_nothing_written(client, settings, case):
    parked = suspended_run()
    run_id = parked.run_id
    post_event(client, run_id, {"name": "other", "payload": 1, "eventId": "taken"})
    before = factories.table_state()
    status, field = {
        "unknown run": (404, None), "wrong token": (401, None), "no token": (401, None), "no name": (400, "name"),
        "nul in payload": (400, "payload.note"), "lone surrogate in name": (400, None), "NaN payload": (400, None),
        "oversized body": (413, None), "unknown field": (400, "eventName"),
        "another payload for the id": (409, "eventId"), "finished run": (409, None), "id too long": (400, "eventId"),
        "bad run id": (400, "runId"),
    }[case]
    body, raw, token, target = {"name": "approved", "payload": {"ok": True}}, None, TOKEN, run_id
    if case == "unknown run":
        target = "run_nobody"
    elif case == "wrong token":
        token = "not-the-token"
    elif case == "no token":
        token = None
    elif case == "no name":
        del body["name"]
    elif case == "nul in payload":
        body["payload"] = {"note": "a\u0000b"}
    elif case == "lone surrogate in name":
        raw = '{"name": "appr\\ud800oved"}'
    elif case == "NaN payload":
        raw = '{"name": "approved", "payload": NaN}'
    elif case == "oversized body":
        settings.SCHEDULER_MAX_REQUEST_BYTES = 1024
        body["payload"] = "x" * 2048
    elif case == "unknown field":
        body["eventName"] = "approved"
    elif case == "another payload for the id":
        body = {"name": "other", "payload": 2, "eventId": "taken"}
    elif case == "finished run":
        lifecycle.cancel_run(run_id)
        before = factories.table_state()
    elif case == "id too long":
        body["eventId"] = "e" * 201
    elif case == "bad run id":
        target = "run%FF"
    answer = refused(post_event(client, target, body, token=token, raw=raw), status)
    if field:
        assert answer["field"] == field, answer
    assert factories.table_state() == before
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) in ("waiting", "cancelled")


@pytest.mark.requirement("WAIT-1")
@pytest.mark.parametrize("fields, field", [
    ({"key": "approval", "kind": "nap"}, "kind"),
    ({"key": "sys:approval", "kind": "timer", "delayMs": 5}, "key"),
    ({"key": "approval", "kind": "event"}, "event"),
    ({"key": "approval", "kind": "timer"}, "delayMs"),
    ({"key": "approval", "kind": "timer", "delayMs": 5, "untilMs": 5}, "untilMs"),
    ({"key": "approval", "kind": "timer", "delayMs": -1}, "delayMs"),
    ({"key": "approval", "kind": "timer", "event": "x", "delayMs": 5}, "event"),
    ({"key": "", "kind": "timer", "delayMs": 5}, "key"),
])
def test_a_bad_wait_is_refused_naming_its_field_with_nothing_written(client, fields, field):
    parked = factories.parked_run()
    before = factories.table_state()
    assert refused(begin_wait(client, parked, **fields), 400)["field"] == field
    assert factories.table_state() == before


def test_a_wait_over_http__suspend_then_the_stored_answer(client):
    parked = factories.parked_run()
    first = begin_wait(client, parked, key="nap", kind="timer", delayMs=60_000)
    assert first.status_code == 200 and first.json()["outcome"] == "suspend" and first.json()["until"]
    done = begin_wait(client, parked, key="done", kind="timer", delayMs=0)
    assert done.json() == {"outcome": "completed", "kind": "timer", "event": None, "until": done.json()["until"],
                           "output": {"timedOut": True}}
