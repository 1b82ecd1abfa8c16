"""Many launches in one statement: each deduplicated on its own key, and a web process's launches share one."""

import json

import pytest
from django.test import Client

from scheduler.errors import IdempotencyConflict, InvalidInput
from scheduler.runs import launches
from tests import factories
from tests.concurrency import threads
from tests.factories import one

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "internal-test-token"


def _request(key=None, play="play", org="org-1"):
    return launches.LaunchRequest(play_name=play, org_id=org, launch={}, max_attempts=3, idempotency_key=key)


@pytest.mark.requirement("RUN-1")
@pytest.mark.requirement("FSH-5")
def test_a_batch__each_launch_answered_as_it_would_be_alone():
    first = launches.launch_run(_request("kept"))
    batch = [launches.PendingLaunch(request) for request in (
        _request(), _request("fresh"), _request("kept"), _request("kept", play="other"), _request("twice"),
        _request("twice"))]

    answers = launches.launch_all(batch)

    plain, fresh, repeat, conflict, twice, twice_again = answers
    assert plain.run_id == batch[0].run_id and not plain.deduplicated
    assert fresh.run_id == batch[1].run_id and not fresh.deduplicated
    assert (repeat.run_id, repeat.deduplicated) == (first.run_id, True)
    assert isinstance(conflict, IdempotencyConflict) and first.run_id in str(conflict)
    assert (twice.deduplicated, twice_again.run_id, twice_again.deduplicated) == (False, twice.run_id, True)
    assert one("SELECT count(*) FROM runs") == 4
    assert one("SELECT count(*) FROM outbox WHERE event_type = 'run.created'") == 4


def test_a_batch_naming_two_releases__is_refused_before_any_statement():
    batch = [launches.PendingLaunch(launches.LaunchRequest(play_name="p", launch={"absurdReleaseId": name}))
             for name in ("rel-a", "rel-b")]
    with pytest.raises(InvalidInput):
        launches.launch_all(batch)
    assert one("SELECT count(*) FROM runs") == 0


def _post_launch(settings_token: str, index: int):
    response = Client().post("/internal/runs", data=json.dumps({"playName": "scheduler.plays:hello", "orgId": "o",
                                                                "input": [index]}),
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {settings_token}")
    return response.status_code


@pytest.mark.requirement("RUN-1")
def test_concurrent_api_launches__each_created_through_the_shared_launcher(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    launcher = launches.shared_launcher()
    assert launcher._claim_idle()  # another launch in flight: every one of these is handed to the group
    try:
        outcomes = threads.run_together(*[lambda i=i: _post_launch(TOKEN, i) for i in range(8)])
    finally:
        launcher._landed(1)
    assert [outcome.get() for outcome in outcomes] == [201] * 8
    assert 1 <= launcher.statements <= 8
    assert sorted(factories.loads(row[0]) for row in factories.query("SELECT input_json FROM runs")) == [[i] for i in range(8)]


@pytest.mark.requirement("RUN-1")
def test_a_lone_launch__runs_on_the_request_thread__one_that_overlaps_another__in_the_group(settings):
    """Issue 47: a launch that finds nothing of the group launcher's in flight is not handed over (each hand-over
    between threads may wait for the GIL); one that overlaps another goes to the group."""
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    launcher = launches.shared_launcher()
    assert _post_launch(TOKEN, 0) == 201
    assert launcher.statements == 0
    assert launcher._claim_idle()
    try:
        assert _post_launch(TOKEN, 1) == 201
    finally:
        launcher._landed(1)
    assert launcher.statements == 1
    assert one("SELECT count(*) FROM runs") == 2


def test_batch_size_one__launches_on_the_request_thread(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    settings.SCHEDULER_LAUNCH_BATCH_SIZE = 1
    assert _post_launch(TOKEN, 0) == 201
    assert not launches._process.started


def test_a_launch_naming_a_release__goes_alone(settings):
    settings.SCHEDULER_INTERNAL_TOKEN = TOKEN
    assert launches.launch(launches.LaunchRequest(play_name="p", launch={"absurdReleaseId": "rel"})).run_id
    assert not launches._process.started
