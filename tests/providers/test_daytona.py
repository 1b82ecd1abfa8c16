"""The Daytona client against a local fake of its REST surface (its shapes held to Daytona's documents by
tests/contract/, its server rules by test_fake_daytona.py)."""

import pytest

from scheduler import outbound
from scheduler.providers import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxRef
from scheduler.providers.base import StartRequest
from scheduler.providers.daytona import DaytonaProvider
from tests.providers.fake_daytona import FakeDaytona

KEYS = {"key-a": "org-a", "key-b": "org-b"}


@pytest.fixture
def daytona():
    with FakeDaytona(KEYS) as fake:
        yield fake, DaytonaProvider(fake.url, {"org-a": "key-a", "org-b": "key-b"}, timeout=5)


RUNNER = ["python3", "-m", "scheduler.sandbox.runner"]


def ref(sandbox_id, org="org-a"):
    return SandboxRef("daytona", sandbox_id, org)


@pytest.mark.requirement("PRV-3")
def test_start__creates_waits_uploads_the_runner_and_starts_it_in_a_session(daytona):
    """PRV-3: the toolbox at the sandbox's toolboxProxyUrl, the runner uploaded by the start itself."""
    fake, provider = daytona
    started = provider.start(StartRequest("run-1", 1, "org-a", {"A": "1"}, RUNNER))
    assert started == SandboxRef("daytona", "dt-1", "org-a")
    assert fake.sandboxes["dt-1"]["env"] == {"A": "1"}
    paths = [path.split("?")[0] for method, path in fake.requests]
    assert paths == ["/api/sandbox", "/api/sandbox/dt-1", "/toolbox/dt-1/files/upload", "/toolbox/dt-1/process/session",
                     "/toolbox/dt-1/process/session/scheduler-runner/exec"]
    assert not any("/toolbox/dt-1/toolbox/" in path for _, path in fake.requests)  # the deprecated proxy paths
    bootstrap = fake.toolbox.uploads["dt-1"][0]
    assert fake.toolbox.commands["dt-1"] == [f"exec python3 {bootstrap} > runner.log 2>&1"]


def test_inspect__running_gone_and_other_orgs_sandbox(daytona):
    fake, provider = daytona
    fake.add("sb-1", "org-a")
    fake.add("sb-2", "org-b")
    fake.add("sb-3", "org-a", state="stopped")
    assert provider.inspect(ref("sb-1")) is Inspection.RUNNING
    assert provider.inspect(ref("sb-3")) is Inspection.GONE
    assert provider.inspect(ref("missing")) is Inspection.GONE
    # Asked with org-b's own key, org-b's sandbox is found; the key follows the routing domain.
    assert provider.inspect(ref("sb-2", "org-b")) is Inspection.RUNNING


def test_no_credential_for_the_organization__permanent_error_and_no_call(daytona):
    fake, provider = daytona
    with pytest.raises(ProviderError) as raised:
        provider.delete(ref("sb-1", "org-unknown"))
    assert raised.value.permanent
    assert fake.requests == []


def test_delete__asynchronous__accepted_keeps_the_state_with_desired_destroyed_then_gone(daytona):
    fake, provider = daytona
    fake.add("sb-1", "org-a")
    assert provider.delete(ref("sb-1")) is DeleteOutcome.ACCEPTED
    assert (fake.sandboxes["sb-1"]["state"], fake.sandboxes["sb-1"]["desiredState"]) == ("started", "destroyed")
    assert provider.read_back(ref("sb-1")) is ReadBack.STILL_PRESENT
    assert provider.read_back(ref("sb-1")) is ReadBack.DELETED
    assert provider.delete(ref("sb-1")) is DeleteOutcome.ALREADY_ABSENT


def test_delete__409_state_change_in_progress__follows_up_with_get(daytona):
    fake, provider = daytona
    fake.add("sb-1", "org-a")
    fake.busy.add("sb-1")
    with pytest.raises(ProviderError) as raised:
        provider.delete(ref("sb-1"))
    assert not raised.value.permanent
    assert fake.requests[-1] == ("GET", "/api/sandbox/sb-1")
    fake.sandboxes["sb-1"]["desiredState"] = "destroyed"
    assert provider.delete(ref("sb-1")) is DeleteOutcome.ACCEPTED


def test_delete__429_is_retryable_with_retry_after(daytona):
    fake, provider = daytona
    fake.script("DELETE", 429, {"message": "slow down"}, {"Retry-After": "7"})
    with pytest.raises(ProviderError) as raised:
        provider.delete(ref("sb-1"))
    assert (raised.value.permanent, raised.value.retry_after) == (False, 7.0)


def test_delete__5xx_retryable__401_permanent(daytona):
    fake, provider = daytona
    fake.script("DELETE", 503, {"message": "unavailable"})
    with pytest.raises(ProviderError) as retryable:
        provider.delete(ref("sb-1"))
    assert not retryable.value.permanent
    fake.script("DELETE", 401, {"message": "Unauthorized"})
    with pytest.raises(ProviderError) as permanent:
        provider.delete(ref("sb-1"))
    assert permanent.value.permanent
    assert "key-a" not in str(permanent.value)


def test_2xx_without_a_sandbox_body__wrong_base_url_is_permanent(daytona):
    fake, provider = daytona
    fake.script("DELETE", 200, b"<html>welcome</html>")
    with pytest.raises(ProviderError, match="SCHEDULER_DAYTONA_API_URL") as raised:
        provider.delete(ref("sb-1"))
    assert raised.value.permanent


def test_inspect__5xx_or_unreachable__unknown_never_gone():
    provider = DaytonaProvider("http://127.0.0.1:9/api", {"org-a": "key-a"}, timeout=1)
    assert provider.inspect(ref("sb-1")) is Inspection.UNKNOWN


def test_find_started__by_the_labels_start_gave_and_only_under_the_orgs_own_key(daytona):
    fake, provider = daytona
    started = provider.start(StartRequest("run-9", 3, "org-a", {}, RUNNER))
    provider.start(StartRequest("run-9", 2, "org-a", {}, RUNNER))
    assert provider.find_started("run-9", 3, "org-a") == [started]
    assert provider.find_started("run-9", 3, "org-b") == []
    fake.sandboxes[started.sandbox_id]["desiredState"] = "destroyed"  # its delete accepted: nothing left to clean
    assert provider.find_started("run-9", 3, "org-a") == []


def test_find_started__failures_are_provider_errors(daytona):
    fake, provider = daytona
    fake.script("GET", 503)
    with pytest.raises(ProviderError) as raised:
        provider.find_started("run-9", 1, "org-a")
    assert not raised.value.permanent
    fake.script("GET", 200, {"unexpected": True})
    with pytest.raises(ProviderError, match="SCHEDULER_DAYTONA_API_URL") as raised:
        provider.find_started("run-9", 1, "org-a")
    assert raised.value.permanent


def test_calls_reuse_one_connection_per_thread():
    with FakeDaytona(KEYS, keep_alive=True) as fake:
        provider = DaytonaProvider(fake.url, {"org-a": "key-a"}, timeout=5)
        try:
            provider.start(StartRequest("run-1", 1, "org-a", {}, RUNNER))
            provider.start(StartRequest("run-2", 1, "org-a", {}, RUNNER))
        finally:
            outbound.close_thread_transports()
    # Two starts, five calls each (create, the read that finds it started, upload, session, exec): one connection.
    assert len(fake.client_ports) == 10 and len(set(fake.client_ports)) == 1


def test_every_threads_client_shares_one_tls_context():
    """A start thread's first HTTPS connection does not build a TLS context of its own (the CA bundle's ~20 ms,
    GIL held)."""
    import threading

    contexts = []

    def connect(number):
        connection = outbound.new_connection("https", "daytona.example", 443, None, 5.0)
        contexts.append(connection._context)
        connection.close()

    threads = [threading.Thread(target=connect, args=(number,)) for number in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(contexts) == 3 and len({id(context) for context in contexts}) == 1


def test_the_organizations_answers_named_are_remembered_boundedly__the_latest_kept(daytona, monkeypatch):
    """A dispatcher is answered about every sandbox it starts and never asks seen_domain: without a bound its
    memory grew by every sandbox it ever started."""
    from scheduler.providers import daytona as module

    monkeypatch.setattr(module, "SEEN_DOMAINS_KEPT", 3)
    fake, _ = daytona
    provider = DaytonaProvider(fake.url, {"org-a": "key-a"}, timeout=5)  # built under the smaller bound
    for index in range(5):
        fake.add(f"sb-{index}", "org-a")
        assert provider.inspect(ref(f"sb-{index}")) is Inspection.RUNNING
    assert provider.inspect(ref("sb-2")) is Inspection.RUNNING  # answered again: the most recent now
    fake.add("sb-5", "org-a")
    assert provider.inspect(ref("sb-5")) is Inspection.RUNNING
    assert [provider.seen_domain(ref(f"sb-{index}")) for index in range(6)] == [
        None, None, "org-a", None, "org-a", "org-a"]
