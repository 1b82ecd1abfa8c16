"""The Modal adapter (PRV-5) against the real `modal` library up to the network.

The library's own Image, Secret and exception classes are used as they are; only the calls that would reach
Modal's servers (Client.from_credentials, App.lookup, Sandbox.create/from_id/from_name) are a fake, and the fake
create binds its arguments to the real Sandbox.create's signature, so an argument the library does not take fails.
"""

import inspect
from pathlib import Path
import os
import subprocess
import sys
import types

import modal
import pytest

from scheduler.providers import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxRef
from scheduler.providers.base import ProviderCause, StartRequest
from scheduler.providers.modal import MAX_LIFETIME_SECONDS, RUNNER_ROOT, ModalProvider
from scheduler.runs.dispatch import sandbox_lifetime
from tests.providers.fake_daytona_toolbox import base_python

RUNNER = ["python3", "-m", "scheduler.sandbox.runner"]
TOKENS = {"ws-a": {"tokenId": "id-a", "tokenSecret": "s-a"}, "ws-b": {"tokenId": "id-b", "tokenSecret": "s-b"}}
CREATE = inspect.signature(modal.Sandbox.create)


def library(connect_error: Exception | None = None):
    """The real library where it stays on this machine; a fake where it would call Modal."""
    fake = types.SimpleNamespace(Image=modal.Image, Secret=modal.Secret, exception=modal.exception,
                                 sandboxes={}, names={}, calls=[], created=[])

    class Client:
        def __init__(self, workspace):
            self.workspace = workspace

        @classmethod
        def from_credentials(cls, token_id, token_secret):
            if connect_error is not None:
                raise connect_error
            return cls({"id-a": "ws-a", "id-b": "ws-b"}[token_id])

    class Sandbox:
        def __init__(self, object_id, client):
            self.object_id, self.client = object_id, client

        @classmethod
        def from_id(cls, object_id, client):
            found = fake.sandboxes.get(object_id)
            if found is None or found[0] != client.workspace:
                raise modal.exception.NotFoundError(object_id)
            return cls(object_id, client)

        @classmethod
        def create(cls, *command, **kwargs):
            bound = CREATE.bind(*command, **kwargs)  # TypeError for anything the real create does not take
            client = bound.arguments["client"]
            object_id = f"sb-{len(fake.sandboxes) + 1}"
            fake.sandboxes[object_id] = (client.workspace, None)
            fake.names[kwargs.get("name")] = object_id
            fake.calls.append(("create", command))
            fake.created.append(bound.arguments)
            return cls(object_id, client)

        @classmethod
        def from_name(cls, app_name, name, client):
            object_id = fake.names.get(name)
            if object_id is None or fake.sandboxes[object_id] != (client.workspace, None):
                raise modal.exception.NotFoundError(name)  # as Modal: only running sandboxes have a name
            return cls(object_id, client)

        def poll(self):
            return fake.sandboxes[self.object_id][1]

        def terminate(self):
            fake.calls.append(("terminate", self.object_id))
            fake.sandboxes[self.object_id] = (self.client.workspace, 137)

    fake.Client, fake.Sandbox = Client, Sandbox
    fake.App = types.SimpleNamespace(lookup=lambda name, create_if_missing, client: None)
    return fake


def start(provider, lifetime=None, run_id="run", attempt=1):
    return provider.start(StartRequest(run_id, attempt, "ws-a", {"A": "1"}, RUNNER, lifetime_seconds=lifetime))


def test_modal__start_inspect_delete_read_back():
    provider = ModalProvider(TOKENS, modal_module=library())
    ref = start(provider)
    assert ref == SandboxRef("modal", "sb-1", "ws-a")
    assert provider.inspect(ref) is Inspection.RUNNING
    assert provider.delete(ref) is DeleteOutcome.ACCEPTED
    assert provider.inspect(ref) is Inspection.GONE
    assert provider.delete(ref) is DeleteOutcome.ALREADY_ABSENT
    assert provider.read_back(ref) is ReadBack.DELETED


@pytest.mark.requirement("PRV-5")
def test_prv5_the_sandbox_lives_as_long_as_its_run_may_never_the_librarys_300_s():
    fake = library()
    provider = ModalProvider(TOKENS, modal_module=fake, default_lifetime=5400)
    start(provider, lifetime=sandbox_lifetime({"contractSnapshot": {"sandbox": {"timeoutSeconds": 7200}}}))
    start(provider, lifetime=None, run_id="run-2")
    start(provider, lifetime=10**6, run_id="run-3")
    assert [created["timeout"] for created in fake.created] == [7260, 5400, MAX_LIFETIME_SECONDS]
    assert CREATE.parameters["timeout"].default == 300  # what an unset timeout would have been


@pytest.mark.requirement("PRV-5")
def test_prv5_the_start_adds_the_runner_to_the_image_and_runs_it_from_there(monkeypatch):
    added = []
    real_add = modal.Image.add_local_dir

    def spy(image, local_path, remote_path, **options):
        added.append((local_path, remote_path, options))
        return real_add(image, local_path, remote_path, **options)

    monkeypatch.setattr(modal.Image, "add_local_dir", spy)
    fake = library()
    start(ModalProvider(TOKENS, modal_module=fake, image="python:3.12-slim"))
    (local_path, remote_path, options), = added
    assert remote_path == RUNNER_ROOT and options == {"copy": False}
    assert sorted(os.listdir(os.path.join(local_path, "scheduler", "sandbox")))[:2] == ["__init__.py", "probe.py"]
    assert isinstance(fake.created[0]["image"], modal.Image)
    command = fake.calls[0][1]
    assert command[:2] == ("sh", "-c") and command[2].startswith(f"PYTHONPATH={RUNNER_ROOT}${{PYTHONPATH:+")
    # The directory the image gets imports under an interpreter that has nothing of this project.
    probe = subprocess.run([base_python(), "-c", "import scheduler.sandbox.runner, scheduler.sandbox.probe"],
                           env={"PYTHONPATH": local_path, "PATH": "/usr/bin:/bin"}, cwd=local_path,
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr


@pytest.mark.requirement("PRV-5")
def test_prv5_a_client_that_cannot_connect_is_a_retryable_provider_error():
    provider = ModalProvider(TOKENS, modal_module=library(modal.exception.ConnectionError("token-secret-xyz down")))
    with pytest.raises(ProviderError) as raised:
        start(provider)
    assert not raised.value.permanent and raised.value.cause is ProviderCause.UNREACHABLE
    assert "token-secret-xyz" not in str(raised.value)
    assert provider.inspect(SandboxRef("modal", "sb-1", "ws-a")) is Inspection.UNKNOWN


def test_a_refused_token_is_permanent():
    provider = ModalProvider(TOKENS, modal_module=library(modal.exception.AuthError("bad token")))
    with pytest.raises(ProviderError) as raised:
        start(provider)
    assert raised.value.permanent and raised.value.cause is ProviderCause.CREDENTIAL_REFUSED


def test_modal__not_found_under_own_workspace__gone_and_already_absent():
    provider = ModalProvider(TOKENS, modal_module=library())
    missing = SandboxRef("modal", "sb-404", "ws-a")
    assert provider.inspect(missing) is Inspection.GONE
    assert provider.delete(missing) is DeleteOutcome.ALREADY_ABSENT


def test_modal__no_token_for_workspace__permanent_error_and_no_call():
    fake = library()
    provider = ModalProvider(TOKENS, modal_module=fake)
    with pytest.raises(ProviderError) as raised:
        provider.delete(SandboxRef("modal", "sb-1", "ws-unknown"))
    assert raised.value.permanent and fake.calls == []


def test_modal__find_started__the_attempts_running_sandbox_by_its_name():
    provider = ModalProvider(TOKENS, modal_module=library())
    ref = start(provider, run_id="run-m", attempt=2)
    assert provider.find_started("run-m", 2, "ws-a") == [ref]
    assert provider.find_started("run-m", 1, "ws-a") == []
    assert provider.find_started("run-m", 2, "ws-b") == []  # another workspace's credential sees nothing
    provider.delete(ref)
    assert provider.find_started("run-m", 2, "ws-a") == []


RECIPES = Path(__file__).resolve().parent.parent.parent / "docs" / "recipes"


def test_the_docs_modal_image_definition_is_built_with_the_real_library_and_given_the_runner(monkeypatch):
    """docs/recipes/modal_image.py as a user would use it: SCHEDULER_MODAL_IMAGE_DEFINITION names it."""
    monkeypatch.syspath_prepend(str(RECIPES))
    added = []
    real_add = modal.Image.add_local_dir
    monkeypatch.setattr(modal.Image, "add_local_dir",
                        lambda image, *args, **options: added.append(image) or real_add(image, *args, **options))
    fake = library()
    start(ModalProvider(TOKENS, modal_module=fake, image_definition="modal_image:plays_image"))
    recipe_image, = added
    assert isinstance(recipe_image, modal.Image) and isinstance(fake.created[0]["image"], modal.Image)


@pytest.mark.parametrize(("definition", "message"), [
    ("no_such_module_here:plays_image", "ModuleNotFoundError"),
    ("json:dumps", "TypeError"),
    ("os:getcwd", "returned str, not a modal.Image"),
])
def test_a_broken_image_definition_is_a_permanent_named_error(definition, message):
    with pytest.raises(ProviderError, match=message) as raised:
        start(ModalProvider(TOKENS, modal_module=library(), image_definition=definition))
    assert raised.value.permanent and raised.value.cause is ProviderCause.NOT_CONFIGURED


def test_the_runner_image_is_defined_once_per_provider_not_once_per_start(monkeypatch):
    added = []
    real_add = modal.Image.add_local_dir
    monkeypatch.setattr(modal.Image, "add_local_dir",
                        lambda image, *args, **options: added.append(image) or real_add(image, *args, **options))
    fake = library()
    provider = ModalProvider(TOKENS, modal_module=fake, image="python:3.12-slim")
    start(provider, run_id="run-1")
    start(provider, run_id="run-2")
    assert len(added) == 1 and fake.created[0]["image"] is fake.created[1]["image"]


UNPACK_AND_FORK = """
import os, sys
from scheduler.providers import runner_bundle
root = runner_bundle.unpacked_runner()
child = os.fork()
if child == 0:
    sys.exit(0)  # a forked child's normal exit runs the inherited exit handlers
os.waitpid(child, 0)
print(root, os.path.isfile(os.path.join(root, "scheduler/sandbox/runner.py")))
"""


def test_unpacked_runner__removed_when_the_process_that_made_it_exits__not_when_a_forked_child_does():
    """The directory Modal's image adds is this process's: each start of a dispatcher left one in /tmp before."""
    done = subprocess.run([sys.executable, "-c", UNPACK_AND_FORK], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2], check=True)
    root, kept_after_child = done.stdout.split()
    assert kept_after_child == "True"
    assert not Path(root).exists()
