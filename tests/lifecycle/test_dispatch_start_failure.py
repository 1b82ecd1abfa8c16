"""A start that fails half-way still leaves its sandbox to cleanup (Daytona: created, runner not started)."""

import pytest

from scheduler.runs import dispatch
from tests import factories
from tests.factories import loads, one, query
from tests.support import wait_for

pytestmark = pytest.mark.django_db


def test_runner_start_fails_after_create__dispatch_lost_and_the_created_sandbox_gets_its_obligation(daytona):
    run_id = factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"})
    daytona.script("POST", 500, {"message": "toolbox down"}, path_contains="/toolbox/")
    result = dispatch.run_once(1)
    assert result.counts["start_failed"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
    assert query("SELECT provider, sandbox_id, routing_domain, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s",
                 [run_id]) == [("daytona", "dt-1", "org-1", "pending")]
    resources = loads(one("SELECT runtime_resources_json FROM runs WHERE run_id = %s", [run_id]))
    assert [resource["sandboxId"] for resource in resources] == ["dt-1"]


def test_create_itself_fails__dispatch_lost_and_nothing_to_clean(daytona):
    run_id = factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"})
    daytona.script("POST", 503, {"message": "busy"}, path_contains="/sandbox")
    assert dispatch.run_once(1).counts["start_failed"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "queued"
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == 0


@pytest.mark.requirement("PRV-2")
def test_a_sandbox_that_never_started_keeps_its_obligation_though_the_list_fails(daytona):
    """PRV-2: the start's error names the sandbox it created, so its obligation needs no (eventually consistent) list."""
    run_id = factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"})
    daytona.after_create = lambda sandbox: sandbox.update(state="build_failed", errorReason="no such base image")
    daytona.script("GET", 503, {"message": "list unavailable"}, path_contains="labels=")
    assert dispatch.run_once(1).counts["start_failed"] == 1
    error = loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s AND attempt = 1", [run_id]))["error"]
    assert error["code"] == "dispatch_lost" and "no such base image" in error["message"]
    assert query("SELECT sandbox_id, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == [
        ("dt-1", "pending")]
    assert not any(method == "DELETE" for method, _ in daytona.requests)  # cleanup deletes it, once, not the start


FAULTS = {  # what the fake does -> whether the failed start had created a sandbox (dt-1)
    "an undocumented state": (lambda fake: setattr(fake, "after_create", lambda s: s.update(state="melting")), True),
    "a malformed answer while waiting": (lambda fake: fake.script("GET", 200, b"<html>", path_contains="/sandbox/dt-1"),
                                         True),
    "a 5xx on create": (lambda fake: fake.script("POST", 503, {"message": "busy"}, path_contains="/api/sandbox"), False),
    "a 5xx while waiting": (lambda fake: fake.script("GET", 502, None, path_contains="/api/sandbox/dt-1"), True),
    "a 5xx on the upload": (lambda fake: fake.script("POST", 502, None, path_contains="/files/upload"), True),
    "a 5xx on the session": (lambda fake: fake.script("POST", 502, None, path_contains="/process/session"), True),
    "a 5xx on the exec": (lambda fake: fake.script("POST", 502, None, path_contains="/exec"), True),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_ends_the_attempt_once_keeps_the_sandbox_and_the_dispatcher_goes_on(daytona, fault):
    arrange, created = FAULTS[fault]
    run_id = factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"})
    arrange(daytona)
    assert dispatch.run_once(1).counts["start_failed"] == 1
    assert query("SELECT attempt, status FROM attempts WHERE run_id = %s", [run_id]) == [(1, "failed")]
    error = loads(one("SELECT runner_result_json FROM attempts WHERE run_id = %s", [run_id]))["error"]
    assert error["code"] == "dispatch_lost" and error["message"].startswith("Daytona")
    kept = query("SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id])
    assert kept == ([("dt-1",)] if created else [])
    assert not any(method == "DELETE" for method, _ in daytona.requests)  # cleanup deletes, once, later
    daytona.after_create = None
    assert dispatch.run_once(1).counts["parked"] == 1  # the next claim (the retry) starts as usual
    assert one("SELECT status FROM runs WHERE run_id = %s", [run_id]) == "waiting"  # parked: its runner waited for


def test_a_create_that_times_out_is_found_by_the_sweep_when_the_provider_makes_it_after_all(daytona, monkeypatch):
    import threading

    from scheduler.providers.daytona import DaytonaProvider
    from scheduler.runs import liveness

    impatient = DaytonaProvider(daytona.url, {"org-1": "key-a"}, timeout=0.3)
    monkeypatch.setattr(dispatch, "get_provider", lambda name: impatient)
    release = threading.Event()
    daytona.create_gate = lambda: release.wait(10)
    run_id = factories.launch(org_id="org-1", launch={"sandboxProvider": "daytona"}, max_attempts=1)
    assert dispatch.run_once(1).counts["start_failed"] == 1
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == 0
    assert one("SELECT count(*) FROM control WHERE key = %s", [f"sandbox_unreconciled:{run_id}:1"]) == 1
    release.set()  # the provider finishes the create the client gave up on
    wait_for(lambda: "dt-1" in daytona.sandboxes, "the late create")
    result = liveness.LivenessTick()
    liveness.reconcile_unparked_sandboxes(10, result)
    assert result.counts["unparked_reconciled"] == 1
    assert query("SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == [("dt-1",)]
