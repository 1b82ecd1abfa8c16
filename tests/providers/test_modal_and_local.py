"""The Modal adapter against a fake `modal` module; the local process sandbox; provider settings."""

import os
import subprocess
import sys
import types

import psutil
import pytest

from scheduler.providers import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxRef
from scheduler.providers.base import StartRequest
from scheduler.providers.local import LocalProvider, reap_children
from scheduler.providers.modal import ModalProvider
from tests.support import PROJECT_DIR


def fake_modal():
    """The library surface the adapter uses: Client, Sandbox, App, Secret, exception."""
    module = types.SimpleNamespace()
    module.exception = types.SimpleNamespace(Error=type("Error", (Exception,), {}))
    module.exception.NotFoundError = type("NotFoundError", (module.exception.Error,), {})
    module.sandboxes = {}  # id -> (workspace, returncode or None)
    module.names = {}  # sandbox name -> id
    module.calls = []

    class Client:
        def __init__(self, workspace):
            self.workspace = workspace

        @classmethod
        def from_credentials(cls, token_id, token_secret):
            return cls({"id-a": "ws-a", "id-b": "ws-b"}[token_id])

    class Sandbox:
        def __init__(self, object_id, client):
            self.object_id, self.client = object_id, client

        @classmethod
        def from_id(cls, object_id, client):
            found = module.sandboxes.get(object_id)
            if found is None or found[0] != client.workspace:
                raise module.exception.NotFoundError(object_id)
            return cls(object_id, client)

        @classmethod
        def create(cls, *command, client, name=None, **kwargs):
            object_id = f"sb-{len(module.sandboxes) + 1}"
            module.sandboxes[object_id] = (client.workspace, None)
            module.names[name] = object_id
            module.calls.append(("create", command))
            return cls(object_id, client)

        @classmethod
        def from_name(cls, app_name, name, client):
            object_id = module.names.get(name)
            if object_id is None or module.sandboxes[object_id] != (client.workspace, None):
                raise module.exception.NotFoundError(name)  # as Modal: only running sandboxes have a name
            return cls(object_id, client)

        def poll(self):
            return module.sandboxes[self.object_id][1]

        def terminate(self):
            module.calls.append(("terminate", self.object_id))
            module.sandboxes[self.object_id] = (self.client.workspace, 137)

    module.Client, module.Sandbox = Client, Sandbox
    module.App = types.SimpleNamespace(lookup=lambda name, create_if_missing, client: object())
    module.Secret = types.SimpleNamespace(from_dict=lambda env: env)
    return module


TOKENS = {"ws-a": {"tokenId": "id-a", "tokenSecret": "s-a"}, "ws-b": {"tokenId": "id-b", "tokenSecret": "s-b"}}


def test_modal__start_inspect_delete_read_back():
    modal = fake_modal()
    provider = ModalProvider(TOKENS, modal_module=modal)
    ref = provider.start(StartRequest("run", 1, "ws-a", {"A": "1"}, ["python3", "-m", "scheduler.sandbox.runner"]))
    assert ref == SandboxRef("modal", "sb-1", "ws-a")
    assert provider.inspect(ref) is Inspection.RUNNING
    assert provider.delete(ref) is DeleteOutcome.ACCEPTED
    assert provider.inspect(ref) is Inspection.GONE
    assert provider.delete(ref) is DeleteOutcome.ALREADY_ABSENT
    assert provider.read_back(ref) is ReadBack.DELETED


def test_modal__not_found_under_own_workspace__gone_and_already_absent():
    provider = ModalProvider(TOKENS, modal_module=fake_modal())
    missing = SandboxRef("modal", "sb-404", "ws-a")
    assert provider.inspect(missing) is Inspection.GONE
    assert provider.delete(missing) is DeleteOutcome.ALREADY_ABSENT


def test_modal__no_token_for_workspace__permanent_error_and_no_call():
    modal = fake_modal()
    provider = ModalProvider(TOKENS, modal_module=modal)
    with pytest.raises(ProviderError) as raised:
        provider.delete(SandboxRef("modal", "sb-1", "ws-unknown"))
    assert raised.value.permanent and modal.calls == []


def test_local__process_group_sandbox_with_identity_that_survives_pid_reuse(tmp_path):
    provider = LocalProvider(tmp_path)
    ref = provider.start(StartRequest("run", 1, None, {"PATH": os.environ["PATH"]},
                                      [sys.executable, "-c", "import time; time.sleep(60)"]))
    pid = int(ref.sandbox_id.split("-")[1])
    assert os.getpgid(pid) == pid  # its own process group
    assert (tmp_path / ref.sandbox_id).is_dir()
    assert provider.inspect(ref) is Inspection.RUNNING
    # Same pid, another start time: a different process, so the sandbox is gone.
    impostor = SandboxRef("local", f"local-{pid}-{int(psutil.Process(pid).create_time() * 1000) - 5000}")
    assert provider.inspect(impostor) is Inspection.GONE
    assert provider.delete(ref) is DeleteOutcome.ACCEPTED
    assert provider.inspect(ref) is Inspection.GONE
    assert provider.read_back(ref) is ReadBack.DELETED
    assert provider.delete(ref) is DeleteOutcome.ALREADY_ABSENT
    assert not (tmp_path / ref.sandbox_id).exists()


def test_local__exited_process__gone(tmp_path):
    provider = LocalProvider(tmp_path)
    ref = provider.start(StartRequest("run", 1, None, {"PATH": os.environ["PATH"]}, [sys.executable, "-c", "pass"]))
    pid = int(ref.sandbox_id.split("-")[1])
    os.waitpid(pid, 0)
    reap_children()
    assert provider.inspect(ref) is Inspection.GONE


@pytest.mark.parametrize("name,value,message", [
    ("SCHEDULER_DAYTONA_API_KEYS", "not json", "SCHEDULER_DAYTONA_API_KEYS must be a JSON object"),
    ("SCHEDULER_DAYTONA_API_KEYS", '{"org": 5}', "SCHEDULER_DAYTONA_API_KEYS must map"),
    ("SCHEDULER_MODAL_TOKENS", '{"ws": {"tokenId": "x"}}', "SCHEDULER_MODAL_TOKENS entries"),
    ("SCHEDULER_DEFAULT_PROVIDER", "kubernetes", "SCHEDULER_DEFAULT_PROVIDER must be one of"),
])
def test_malformed_provider_settings__refused_at_start_up_without_echoing_keys(name, value, message):
    env = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/none", **{name: value})
    result = subprocess.run([sys.executable, str(PROJECT_DIR / "manage.py"), "check"], cwd=PROJECT_DIR, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr
    assert value not in result.stderr or name == "SCHEDULER_DEFAULT_PROVIDER"


def test_modal__find_started__the_attempts_running_sandbox_by_its_name():
    modal = fake_modal()
    provider = ModalProvider(TOKENS, modal_module=modal)
    ref = provider.start(StartRequest("run-m", 2, "ws-a", {}, ["python3", "-m", "scheduler.sandbox.runner"]))
    assert provider.find_started("run-m", 2, "ws-a") == [ref]
    assert provider.find_started("run-m", 1, "ws-a") == []
    assert provider.find_started("run-m", 2, "ws-b") == []  # another workspace's credential sees nothing
    provider.delete(ref)
    assert provider.find_started("run-m", 2, "ws-a") == []


def test_local__find_started__reads_the_tag_start_wrote(tmp_path):
    provider = LocalProvider(tmp_path)
    ref = provider.start(StartRequest("run-l", 1, None, dict(os.environ), [sys.executable, "-c", "import time; time.sleep(60)"]))
    try:
        assert provider.find_started("run-l", 1, None) == [ref]
        assert provider.find_started("run-l", 2, None) == []
        assert provider.find_started("run-other", 1, None) == []
    finally:
        provider.delete(ref)


@pytest.mark.parametrize("bind,debug,allowed,refused", [
    ("127.0.0.1:8000", False, False, False),
    ("[::1]:8000", False, False, False),
    ("0.0.0.0:8000", False, False, True),
    ("0.0.0.0:8000", True, False, False),
    ("10.1.2.3:8000", False, True, False),
])
def test_local_provider__refuses_plays_on_a_reachable_bind_outside_debug(settings, tmp_path, bind, debug, allowed, refused):
    from scheduler.providers.registry import local_start_refusal

    settings.SCHEDULER_BIND, settings.DEBUG, settings.SCHEDULER_ALLOW_LOCAL_SANDBOXES = bind, debug, allowed
    reason = local_start_refusal()
    assert (reason is not None) == refused
    if refused:
        with pytest.raises(ProviderError, match="local sandboxes are for development") as raised:
            LocalProvider(tmp_path, refuse_starts=reason).start(StartRequest("run-1", 1, None, {}, ["true"]))
        assert raised.value.permanent


def test_the_providers_are_declared_once__registry_constraints_and_settings_follow_the_enum():
    from scheduler.conf import SchedulerSettings
    from scheduler.kinds import Provider, values
    from scheduler.models.cleanup_tables import PROVIDERS
    from scheduler.providers import registry

    assert set(registry.BUILDERS) == set(Provider)
    assert tuple(PROVIDERS) == values(Provider)
    with pytest.raises(Exception, match="must be one of " + ", ".join(values(Provider))):
        SchedulerSettings.environment({"SCHEDULER_DEFAULT_PROVIDER": "kubernetes"})
