"""FSH-5: an idempotent launch: a repeat answers the first run, another body is a conflict, concurrent duplicates
make one run (the unique index is the arbiter, not a read before the insert)."""

import json
import threading

import pytest
from django.db import connections
from django.test import Client

from scheduler.runs import admission
from tests import factories
from tests.factories import one, query

TOKEN = "internal-test-token"
BODY = {"playName": "tests.plays:fail", "orgId": "org-a", "input": {"n": 1}, "idempotencyKey": "order-7"}


@pytest.fixture(autouse=True)
def internal_token(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN


def launch(client, body):
    response = client.post("/internal/runs", data=json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    return response.status_code, response.json()


@pytest.mark.django_db
def test_a_repeat_with_the_same_body__200_the_first_run_deduplicated__whatever_its_status(client):
    status, first = launch(client, BODY)
    assert status == 201 and set(first) == {"runId"}
    assert launch(client, BODY) == (200, {"runId": first["runId"], "deduplicated": True})
    query("UPDATE runs SET status = 'completed', finished_at = now() WHERE run_id = %s", [first["runId"]])
    assert launch(client, BODY) == (200, {"runId": first["runId"], "deduplicated": True})
    assert one("SELECT count(*) FROM runs") == 1
    assert one("SELECT count(*) FROM outbox WHERE event_type = 'run.created'") == 1


@pytest.mark.django_db
def test_the_same_key_with_another_body__409_idempotency_conflict__nothing_written(client):
    launch(client, BODY)
    before = factories.table_state()
    status, answer = launch(client, {**BODY, "input": {"n": 2}})
    assert status == 409 and answer["error"] == "idempotency_conflict" and answer["field"] == "idempotencyKey"
    assert factories.table_state() == before


@pytest.mark.django_db
def test_keys_are_per_org__and_runs_without_an_org_share_one_space(client):
    assert launch(client, BODY)[0] == 201
    assert launch(client, {**BODY, "orgId": "org-b"})[0] == 201
    orgless = {key: value for key, value in BODY.items() if key != "orgId"}
    status, first = launch(client, orgless)
    assert status == 201 and launch(client, orgless) == (200, {"runId": first["runId"], "deduplicated": True})
    assert launch(client, {**BODY, "idempotencyKey": None})[0] == 201  # no key: no deduplication
    assert launch(client, {**BODY, "idempotencyKey": None})[0] == 201
    assert one("SELECT count(*) FROM runs") == 5


@pytest.mark.django_db
def test_a_repeat_after_its_release_closed__still_answers_the_first_run(client):
    admission.set_admission("rel-i", True, 1)
    body = {**BODY, "launch": {"absurdReleaseId": "rel-i"}}
    status, first = launch(client, body)
    admission.set_admission("rel-i", False, 2)
    assert launch(client, body) == (200, {"runId": first["runId"], "deduplicated": True})
    assert launch(client, {**body, "idempotencyKey": "another"})[1]["error"] == "release_closed"


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "   ", 7, ["k"], "k" * 201, "a\u0000b", "\ud800"])
def test_a_bad_key__400_naming_idempotency_key__nothing_written(client, key):
    before = factories.table_state()
    status, answer = launch(client, {**BODY, "idempotencyKey": key})
    assert status == 400 and answer["field"] == "idempotencyKey", answer
    assert factories.table_state() == before


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicates__exactly_one_run__every_answer_names_it():
    """Eight real connections launch the same keyed body behind a barrier: one insert wins, the others wait on
    the unique index for its commit and answer its run."""
    barrier = threading.Barrier(8)
    answers, errors = [], []

    def post():
        try:
            barrier.wait()
            answers.append(launch(Client(), BODY))
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert one("SELECT count(*) FROM runs") == 1
    run_id = one("SELECT run_id FROM runs")
    assert sorted(status for status, _ in answers) == [200] * 7 + [201]
    assert {answer["runId"] for _, answer in answers} == {run_id}


def test_a_repeat_spanning_the_deploy_that_added_fair_share_fields__keeps_its_digest():
    """Runs launched before priority, concurrency and runAfter existed were digested without them."""
    import dataclasses
    import hashlib

    from scheduler.runs.lifecycle import Concurrency, LaunchRequest

    request = LaunchRequest(play_name="m:f", org_id="org-a", input={"n": 1}, idempotency_key="order-7")
    before = {key: value for key, value in dataclasses.asdict(request).items()
              if key not in ("priority", "concurrency", "run_after")}
    digest = hashlib.sha256(json.dumps(before, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()
    assert request.digest() == digest
    assert dataclasses.replace(request, priority=5).digest() != digest
    assert dataclasses.replace(request, concurrency=Concurrency("k", 1)).digest() != digest
