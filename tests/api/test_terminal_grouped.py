"""POST /internal/runner/terminal outside a transaction settles through the process's group settler."""

import json

import pytest
from django.test import Client

from scheduler.runs import settler
from scheduler.runs.tokens import mint_runner_token
from tests import factories
from tests.concurrency import threads

pytestmark = pytest.mark.django_db(transaction=True)


def _post_terminal(parked):
    body = {"runId": parked.run_id, "attempt": 1, "leaseToken": parked.lease_token,
            "result": factories.completed_result({"run": parked.run_id})}
    token = mint_runner_token(parked.run_id, 1, parked.lease_token)
    response = Client().post("/internal/runner/terminal", data=json.dumps(body), content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, response.json()


def test_concurrent_terminals__each_answered_and_settled_through_the_shared_settler():
    parked = [factories.parked_run() for _ in range(8)]
    outcomes = threads.run_together(*[lambda p=p: _post_terminal(p) for p in parked])
    assert [outcome.get() for outcome in outcomes] == \
        [(200, {"recorded": True, "settled": True, "runStatus": "completed"})] * 8
    shared = settler.shared_settler()
    assert 1 <= shared.statements <= 8
    assert factories.one("SELECT count(*) FROM runtime_scheduler.runs WHERE status = 'completed'") == 8


def test_batch_size_one__settles_on_the_request_thread(settings):
    settings.SCHEDULER_SETTLE_BATCH_SIZE = 1
    parked = factories.parked_run()
    assert _post_terminal(parked)[1]["runStatus"] == "completed"
    assert not settler._process.started
