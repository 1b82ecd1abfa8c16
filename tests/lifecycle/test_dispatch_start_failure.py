"""A start that fails half-way still leaves its sandbox to cleanup (Daytona: created, runner not started)."""

import pytest

from scheduler.runs import dispatch
from tests import factories
from tests.factories import loads, one, query

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
