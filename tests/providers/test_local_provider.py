"""The local process sandbox; provider settings."""

import os
import subprocess
import sys

import psutil
import pytest

from scheduler.providers import DeleteOutcome, Inspection, ProviderError, ReadBack, SandboxRef
from scheduler.providers.base import StartRequest
from scheduler.providers.local import LocalProvider, reap_children
from tests.support import PROJECT_DIR


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


@pytest.mark.requirement("APP-6")
def test_app6__a_local_sandbox_imports_the_projects_code(settings, tmp_path):
    """APP-6: the project's BASE_DIR first (a user's `shop.tasks` imports), then the scheduler's own install (the
    runner); SCHEDULER_SANDBOX_PYTHONPATH replaces the first."""
    import os

    from scheduler.providers.local import SCHEDULER_IMPORT_ROOT, local_env

    settings.BASE_DIR = tmp_path
    assert local_env()["PYTHONPATH"].split(os.pathsep) == [str(tmp_path), SCHEDULER_IMPORT_ROOT]
    settings.SCHEDULER_SANDBOX_PYTHONPATH = os.pathsep.join(["/srv/plays", "/srv/lib"])
    assert local_env()["PYTHONPATH"].split(os.pathsep) == ["/srv/plays", "/srv/lib", SCHEDULER_IMPORT_ROOT]
