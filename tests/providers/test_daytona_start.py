"""PRV-1, PRV-2 and the faults of a Daytona start: what the create says, the wait for `started`, and a start that
fails at any step ending once with a named error that names the sandbox it created (so it keeps its cleanup
obligation) and deletes nothing itself."""

import threading

import pytest

from scheduler.providers import ProviderError, SandboxRef
from scheduler.providers.base import ProviderCause, StartRequest
from scheduler.providers.daytona import DaytonaProvider
from tests.providers.fake_daytona import FakeDaytona

RUNNER = ["python3", "-m", "scheduler.sandbox.runner"]


def request(run_id="run-1", cpu=2.0, memory_mb=3000):
    return StartRequest(run_id, 1, "org-a", {"SCHEDULER_API_URL": "http://api"}, RUNNER, cpu=cpu, memory_mb=memory_mb)


@pytest.fixture
def fake():
    with FakeDaytona({"key-a": "org-a"}) as server:
        yield server


def provider(fake, **options):
    return DaytonaProvider(fake.url, {"org-a": "key-a"}, timeout=options.pop("timeout", 5), **options)


def create_body(fake) -> dict:
    return next(body for method, path, body in fake.bodies if (method, path) == ("POST", "/api/sandbox"))


@pytest.mark.requirement("PRV-1")
def test_prv1_a_snapshot_sandbox_names_no_resources_and_carries_env_labels_and_no_auto_stop(fake):
    provider(fake, snapshot="daytona-small").start(request())
    body = create_body(fake)
    assert body == {"snapshot": "daytona-small", "env": {"SCHEDULER_API_URL": "http://api"}, "autoStopInterval": 0,
                    "labels": {"runId": "run-1", "attempt": "1"}}
    assert fake.sandboxes["dt-1"]["env"] == {"SCHEDULER_API_URL": "http://api"}


@pytest.mark.requirement("PRV-1")
def test_prv1_the_organizations_default_snapshot_when_none_is_set(fake):
    provider(fake).start(request())
    assert "snapshot" not in create_body(fake) and "cpu" not in create_body(fake)


@pytest.mark.requirement("PRV-1")
def test_prv1_a_declarative_build_carries_its_resources(fake):
    provider(fake, dockerfile="FROM python:3.12-slim\n", disk_gb=5).start(request(cpu=1.5, memory_mb=3000))
    body = create_body(fake)
    assert body["buildInfo"] == {"dockerfileContent": "FROM python:3.12-slim\n"}
    assert (body["cpu"], body["memory"], body["disk"]) == (2, 3, 5)  # whole cores and GiB, rounded up
    assert "snapshot" not in body


@pytest.mark.requirement("PRV-2")
def test_prv2_the_start_reads_until_started_before_it_touches_the_toolbox():
    with FakeDaytona({"key-a": "org-a"}, start_after=3) as fake:
        provider(fake).start(request())
        paths = [path.split("?")[0] for _, path in fake.requests]
    assert paths[:4] == ["/api/sandbox"] + ["/api/sandbox/dt-1"] * 3
    assert paths[4] == "/toolbox/dt-1/files/upload"


@pytest.mark.requirement("PRV-2")
@pytest.mark.parametrize("state", ["error", "build_failed"])
def test_prv2_error_states_end_the_start_with_the_providers_reason_and_name_the_sandbox(fake, state):
    fake.after_create = lambda sandbox: sandbox.update(state=state, errorReason="image pull failed: no such tag")
    with pytest.raises(ProviderError, match="image pull failed: no such tag") as raised:
        provider(fake).start(request())
    assert raised.value.cause is ProviderCause.SANDBOX_FAILED
    assert raised.value.sandbox == SandboxRef("daytona", "dt-1", "org-a")
    assert not any(method == "DELETE" for method, _ in fake.requests)


@pytest.mark.requirement("PRV-2")
def test_prv2_a_sandbox_that_never_starts_ends_the_start_at_the_timeout():
    with FakeDaytona({"key-a": "org-a"}, start_after=10**9) as fake:
        with pytest.raises(ProviderError, match=r"did not start within 0.3 s \(last state starting\)") as raised:
            provider(fake, start_timeout=0.3).start(request())
    assert raised.value.cause is ProviderCause.START_TIMEOUT and not raised.value.permanent
    assert raised.value.sandbox.sandbox_id == "dt-1"


def test_a_state_the_documents_do_not_list_ends_the_start_named(fake):
    fake.after_create = lambda sandbox: sandbox.update(state="melting")
    with pytest.raises(ProviderError, match="undocumented state 'melting'") as raised:
        provider(fake).start(request())
    assert raised.value.cause is ProviderCause.MALFORMED_ANSWER and raised.value.sandbox.sandbox_id == "dt-1"


def test_a_sandbox_stopped_or_deleted_before_it_started_ends_the_start(fake):
    fake.after_create = lambda sandbox: sandbox.update(desiredState="destroyed")
    with pytest.raises(ProviderError, match="before it started") as raised:
        provider(fake).start(request())
    assert raised.value.sandbox.sandbox_id == "dt-1"


@pytest.mark.parametrize(("method", "step"), [("GET", "/api/sandbox/dt-1"), ("POST", "/files/upload"),
                                             ("POST", "/process/session"), ("POST", "/exec")])
def test_a_5xx_at_any_step_after_the_create_names_the_sandbox(fake, method, step):
    fake.script(method, 502, {"message": "bad gateway"}, path_contains=step)  # the first call to match answers it
    with pytest.raises(ProviderError, match="502") as raised:
        provider(fake).start(request())
    assert not raised.value.permanent and raised.value.sandbox.sandbox_id == "dt-1"


def test_a_malformed_create_answer_is_permanent_and_names_the_base_url(fake):
    fake.script("POST", 200, b"<html>welcome</html>", path_contains="/api/sandbox")
    with pytest.raises(ProviderError, match="SCHEDULER_DAYTONA_API_URL") as raised:
        provider(fake).start(request())
    assert raised.value.permanent and raised.value.sandbox is None


def test_a_refused_create_says_the_servers_words_and_the_cause(fake):
    with pytest.raises(ProviderError, match="Snapshot missing-one not found") as raised:
        provider(fake, snapshot="missing-one").start(request())
    assert raised.value.cause is ProviderCause.NOT_FOUND and raised.value.permanent
    fake.keys.clear()
    with pytest.raises(ProviderError) as refused:
        provider(fake).start(request())
    assert refused.value.cause is ProviderCause.CREDENTIAL_REFUSED and "key-a" not in str(refused.value)


def test_a_create_that_times_out_is_retryable_and_leaves_what_it_made_findable(fake):
    release = threading.Event()
    fake.create_gate = lambda: release.wait(5)
    with pytest.raises(ProviderError) as raised:
        provider(fake, timeout=0.3).start(request())
    release.set()
    assert raised.value.cause is ProviderCause.UNREACHABLE and not raised.value.permanent
    assert raised.value.sandbox is None  # no answer named it: the dispatcher asks by its labels instead
    fake.create_gate = None
    found = []
    for _ in range(50):
        found = provider(fake).find_started("run-1", 1, "org-a")
        if found:
            break
        release.wait(0.05)
    assert found == [SandboxRef("daytona", "dt-1", "org-a")]


def test_the_toolbox_answering_an_empty_200_as_the_daemon_does_is_accepted(fake):
    fake.script("POST", 200, None, path_contains="/files/upload")
    provider(fake).start(request())
    assert fake.toolbox.commands["dt-1"]


@pytest.mark.parametrize(("method", "step"), [("GET", "/api/sandbox/dt-1"), ("POST", "/files/upload"),
                                             ("POST", "/process/session"), ("POST", "/exec")])
def test_a_timeout_at_any_step_after_the_create_is_retryable_and_names_the_sandbox(fake, method, step):
    released = fake.stall(method, step)
    try:
        with pytest.raises(ProviderError, match="ReadTimeout") as raised:
            provider(fake, timeout=0.3).start(request())
    finally:
        released.set()
    assert raised.value.cause is ProviderCause.UNREACHABLE and not raised.value.permanent
    assert raised.value.sandbox.sandbox_id == "dt-1"
