"""PRV-6: the fake refuses what Daytona's server refuses (the rules its documents cannot express, read from
apps/api's sandbox controller and service at v0.190.0), asked directly over HTTP, not through this project's client."""

import httpx
import pytest

from tests.providers.fake_daytona import FakeDaytona

A, B = {"Authorization": "Bearer key-a"}, {"Authorization": "Bearer key-b"}


@pytest.fixture
def fake():
    with FakeDaytona({"key-a": "org-a", "key-b": "org-b"}) as server:
        yield server


def post(fake, body, headers=A):
    return httpx.post(f"{fake.url}/sandbox", json=body, headers=headers, timeout=5)


@pytest.mark.parametrize("field", ["cpu", "gpu", "memory", "disk"])
def test_resources_with_a_snapshot_are_refused(fake, field):
    answer = post(fake, {"snapshot": "daytona-small", field: 1})
    assert answer.status_code == 400
    assert answer.json()["message"] == "Cannot specify Sandbox resources when using a snapshot"
    assert post(fake, {field: 2}).status_code == 400  # the organization's default snapshot is a snapshot too
    assert fake.sandboxes == {}


def test_a_snapshot_with_a_build_and_an_unknown_snapshot_are_refused(fake):
    both = post(fake, {"snapshot": "daytona-small", "buildInfo": {"dockerfileContent": "FROM python:3.12"}})
    assert both.status_code == 400 and "build info" in both.json()["message"]
    missing = post(fake, {"snapshot": "nope"})
    assert missing.status_code == 400 and missing.json()["message"].startswith("Snapshot nope not found")


def test_create_answers_starting_and_a_build_pending_build(fake):
    assert post(fake, {"snapshot": "daytona-small"}).json()["state"] == "starting"
    built = post(fake, {"buildInfo": {"dockerfileContent": "FROM python:3.12"}, "cpu": 2, "memory": 4, "disk": 8})
    assert (built.json()["state"], built.json()["cpu"]) == ("pending_build", 2)


def test_a_delete_while_starting_is_409_and_a_delete_keeps_the_state_with_desired_destroyed(fake):
    sandbox_id = post(fake, {}).json()["id"]
    assert httpx.delete(f"{fake.url}/sandbox/{sandbox_id}", headers=A).status_code == 409
    assert httpx.get(f"{fake.url}/sandbox/{sandbox_id}", headers=A).json()["state"] == "started"
    deleted = httpx.delete(f"{fake.url}/sandbox/{sandbox_id}", headers=A).json()
    assert (deleted["state"], deleted["desiredState"]) == ("started", "destroyed")
    assert httpx.get(f"{fake.url}/sandbox/{sandbox_id}", headers=A).json()["desiredState"] == "destroyed"
    assert httpx.get(f"{fake.url}/sandbox/{sandbox_id}", headers=A).status_code == 404


def test_another_organizations_sandbox_is_404_and_no_key_is_401(fake):
    fake.add("sb-a", "org-a")
    assert httpx.get(f"{fake.url}/sandbox/sb-a", headers=B).status_code == 404
    assert httpx.delete(f"{fake.url}/sandbox/sb-a", headers=B).status_code == 404
    assert httpx.get(f"{fake.url}/sandbox/sb-a").status_code == 401
    assert httpx.post(f"{fake.root}/toolbox/sb-a/process/session", json={"sessionId": "s"}, headers=B).status_code == 404


def test_the_toolbox_of_a_sandbox_not_yet_started_refuses(fake):
    sandbox_id = post(fake, {}).json()["id"]
    answer = httpx.post(f"{fake.root}/toolbox/{sandbox_id}/process/session", json={"sessionId": "s"}, headers=A)
    assert answer.status_code == 400
