"""RCP-1/RCP-2 over HTTP: the runner's receipt endpoints, their token scope, fences and hostile input."""

import json

import pytest

from scheduler.runs.tokens import mint_runner_token
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _post(client, parked, operation, body, token=None):
    if isinstance(body, dict):
        body = {"runId": parked.run_id, "attempt": parked.attempt, "leaseToken": parked.lease_token, **body}
    token = token or mint_runner_token(parked.run_id, parked.attempt, parked.lease_token)
    response = client.post(f"/internal/runner/receipts/{operation}", json.dumps(body) if isinstance(body, dict)
                           else body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, response.json()


@pytest.fixture
def parked():
    return factories.parked_run()


def test_single_and_batch_round_trip(client, parked):
    status, claimed = _post(client, parked, "claim", {"key": "charge", "leaseMs": 5000})
    assert status == 200 and claimed["receipt"]["outcome"] == "claimed"
    lease = claimed["receipt"]["leaseId"]
    status, beat = _post(client, parked, "heartbeat", {"receipts": [{"key": "charge", "leaseId": lease}]})
    assert status == 200 and beat["receipts"][0]["outcome"] == "extended"
    status, done = _post(client, parked, "complete", {"key": "charge", "leaseId": lease, "output": {"id": "ch_1"}})
    assert status == 200 and done["receipt"] | {"leaseExpiresAt": None} == {
        "key": "charge", "outcome": "completed", "status": "completed", "written": True, "leaseId": None,
        "leaseExpiresAt": None, "runAttempt": 1, "output": {"id": "ch_1"}, "error": None}
    status, batch = _post(client, parked, "claim", {"receipts": [{"key": "charge"}, {"key": "email"}]})
    assert [item["outcome"] for item in batch["receipts"]] == ["completed", "claimed"]
    assert batch["receipts"][0]["output"] == {"id": "ch_1"}
    email = batch["receipts"][1]["leaseId"]
    status, failed = _post(client, parked, "fail", {"key": "email", "leaseId": email, "final": True,
                                                    "error": {"code": "smtp", "message": "refused"}})
    assert failed["receipt"]["error"] == {"code": "smtp", "message": "refused", "final": True}
    assert _post(client, parked, "skip", {"key": "optional"})[1]["receipt"]["outcome"] == "skipped"
    assert _post(client, parked, "mark-queued", {"receipts": [{"key": "later"}]})[1]["receipts"][0]["outcome"] == "queued"
    status, claimed = _post(client, parked, "claim", {"key": "later"})
    released = _post(client, parked, "release", {"key": "later", "leaseId": claimed["receipt"]["leaseId"]})[1]
    assert released["receipt"]["outcome"] == "queued"


def test_a_token_for_another_attempt_or_run_is_refused(client, parked):
    other = factories.parked_run()
    status, body = _post(client, parked, "claim", {"key": "k"},
                         token=mint_runner_token(other.run_id, other.attempt, other.lease_token))
    assert (status, body["error"]) == (401, "unauthorized")


def test_a_settled_attempt_answers_409_and_writes_nothing(client, parked):
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    before = factories.table_state()
    status, body = _post(client, parked, "claim", {"key": "k"})
    assert (status, body["error"]) == (409, "attempt_not_current")
    assert factories.table_state() == before


HOSTILE = {
    "no key": ("claim", {}, "key"),
    "key not text": ("claim", {"key": 7}, "key"),
    "empty key": ("claim", {"key": ""}, "key"),
    "key with NUL": ("claim", {"key": "a\u0000b"}, "key"),
    "key too long": ("claim", {"key": "k" * 513}, "key"),
    "sys key": ("claim", {"key": "sys:billing"}, "key"),
    "sys key in a batch": ("complete", {"receipts": [{"key": "a", "output": 1}, {"key": "sys:x", "output": 2}]},
                           "receipts[1].key"),
    "receipts not a list": ("claim", {"receipts": {"key": "a"}}, "receipts"),
    "batch too large": ("claim", {"receipts": [{"key": f"k{index}"} for index in range(1001)]}, "receipts"),
    "item not an object": ("claim", {"receipts": ["a"]}, "receipts[0]"),
    "duplicate keys": ("claim", {"receipts": [{"key": "a"}, {"key": "a"}]}, "receipts"),
    "leaseMs too small": ("claim", {"key": "a", "leaseMs": 5}, "leaseMs"),
    "leaseMs a float": ("heartbeat", {"key": "a", "leaseId": "l", "leaseMs": 1.5e3}, "leaseMs"),
    "no output": ("complete", {"key": "a"}, "output"),
    "output NaN": ("complete", '{"key": "a", "output": NaN}', None),
    "output lone surrogate": ("complete", {"key": "a", "output": "\ud800"}, "output"),
    "fail without lease": ("fail", {"key": "a", "error": {"code": "x", "message": "y"}}, "leaseId"),
    "fail without error": ("fail", {"key": "a", "leaseId": "l"}, "error"),
    "error code missing": ("fail", {"key": "a", "leaseId": "l", "error": {"message": "y"}}, "error.code"),
    "final not boolean": ("fail", {"key": "a", "leaseId": "l", "error": {"code": "x"}, "final": "yes"}, "final"),
    "release without lease": ("release", {"key": "a"}, "leaseId"),
    "returnOutput not boolean": ("complete", {"key": "a", "output": 1, "returnOutput": 1}, "returnOutput"),
}


@pytest.mark.requirement("RCP-1")
@pytest.mark.parametrize("operation", ["claim", "complete", "fail", "release", "heartbeat", "skip", "mark-queued"])
def test_an_empty_batch__answers_an_empty_list__writes_nothing(client, parked, operation):
    """RCP-1: as the seed's, an empty batch is an empty answer, not a 400."""
    before = factories.table_state()
    status, answer = _post(client, parked, operation, {"receipts": []})
    assert (status, answer["receipts"]) == (200, [])
    assert factories.table_state() == before


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_input__4xx_naming_the_field_and_nothing_written(client, parked, case):
    operation, body, field = HOSTILE[case]
    if isinstance(body, str):  # raw text: JSON the json module would accept but PostgreSQL cannot store
        body = body[:-1] + f', "runId": "{parked.run_id}", "attempt": 1, "leaseToken": "{parked.lease_token}"}}'
    before = factories.table_state()
    status, answer = _post(client, parked, operation, body)
    assert 400 <= status < 500 and answer["error"] in ("invalid_input", "immutable_receipt_key"), answer
    if field is not None:
        assert answer["field"] == field, answer
    assert factories.table_state() == before


def test_random_hostile_receipt_bodies__never_a_server_error(client, parked):
    import random

    from tests.api.test_fuzz import nasty_value

    rng = random.Random(20261130)
    fields = ["key", "leaseId", "output", "error", "final", "receipts", "leaseMs", "returnOutput"]
    identity = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token}
    for _ in range(60):
        for operation in ("claim", "complete", "fail", "release", "skip", "mark-queued", "heartbeat"):
            body = {name: nasty_value(rng) for name in rng.sample(fields, rng.randint(1, 5))}
            if rng.random() < 0.5:
                body["key"] = rng.choice(["a", "sys:a", "b"])
            if rng.random() < 0.3:
                body["receipts"] = [{"key": rng.choice(["a", "b", "sys:c"]), **{
                    name: nasty_value(rng) for name in rng.sample(fields[1:5], 2)}} for _ in range(rng.randint(1, 3))]
            status, _ = _post(client, parked, operation, json.dumps({**body, **identity}))
            assert status < 500, (operation, body)
