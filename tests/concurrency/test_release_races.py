"""ADM-4/ADM-5: a release close racing launches lets no run in after the close commits."""

import threading
import time

import pytest
from django.db import transaction

from scheduler import db
from scheduler.runs import admission
from scheduler.errors import ReleaseClosed
from tests import factories
from tests.concurrency import threads
from tests.factories import one

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.requirement("ADM-4")
def test_launch_blocked_behind_an_uncommitted_close__refused_once_it_commits():
    admission.set_admission("rel", True, 1)
    may_commit, holding = threading.Event(), threading.Event()

    def close_and_hold():
        with transaction.atomic():
            db.fetch_all("release_admission_set", {"keys": ["rel"], "accepting": False, "admission_epoch": 2})
            holding.set()
            may_commit.wait(30)

    closer, closed = threads.start(close_and_hold)
    assert holding.wait(30)
    launcher, launched = threads.start(
        lambda: factories.launch(launch={"absurdReleaseId": "rel"}), application_name="blocked-launcher"
    )
    try:
        threads.wait_until_blocked("blocked-launcher")
    finally:
        may_commit.set()
    closer.join(30)
    launcher.join(30)
    closed.get()
    with pytest.raises(ReleaseClosed):
        launched.get()
    assert one("SELECT count(*) FROM runs") == 0


@pytest.mark.requirement("ADM-5")
def test_close_racing_many_launches__no_run_starts_after_the_close_committed():
    admission.set_admission("rel", True, 1)
    launchers, per_launcher = 6, 15
    barrier = threading.Barrier(launchers + 1)
    attempts = []  # (started_at, run_id or None)
    lock = threading.Lock()
    closed_at = {}

    def launch_many():
        for _ in range(per_launcher):
            started = time.monotonic()
            try:
                run_id = factories.launch(launch={"absurdReleaseId": "rel"})
            except ReleaseClosed:
                run_id = None
            with lock:
                attempts.append((started, run_id))

    def close():
        admission.set_admission("rel", False, 2)
        closed_at["t"] = time.monotonic()

    started = [threads.start(launch_many, barrier=barrier) for _ in range(launchers)]
    started.append(threads.start(close, barrier=barrier))
    for thread, outcome in started:
        thread.join(120)
        outcome.get()
    admitted = {run_id for _, run_id in attempts if run_id}
    after_close = [run_id for started_at, run_id in attempts if started_at > closed_at["t"]]
    assert all(run_id is None for run_id in after_close)
    assert one("SELECT count(*) FROM runs WHERE launch_json ->> 'absurdReleaseId' = 'rel'") == len(admitted)
    assert one("SELECT count(*) FROM outbox WHERE event_type = 'run.created'") == len(admitted)
