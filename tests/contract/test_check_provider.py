"""PRV-7: `check_provider` as a user with a real account runs it first: against the fake behind Daytona's
documents (Prism), the local provider, and each failure a user meets, named in one line, with nothing left behind."""

import io
import signal
import subprocess

import pytest
from django.core.management import call_command

from scheduler import outbound
from scheduler.providers.registry import get_provider
from tests.factories import one
from tests.support import PROJECT_DIR, current_database_url, free_port, manage_command, manage_env

pytestmark = pytest.mark.django_db(transaction=True)


def check(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("check_provider", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    finally:
        outbound.close_thread_transports()
    return code, out.getvalue(), err.getvalue()


def mine(fake, before: set) -> list[dict]:
    return [sandbox for sandbox_id, sandbox in fake.sandboxes.items() if sandbox_id not in before]


@pytest.mark.requirement("PRV-7")
def test_daytona__every_step_timed__the_sandbox_deleted_and_read_back_gone(daytona_live):
    before = set(daytona_live.fake.sandboxes)
    code, out, err = check("daytona", "--routing-domain", "org-contract")
    assert code == 0, out + err
    for step in ("create the sandbox and start its runner: ok (", "runner heartbeat through http://", "delete the "
                 "sandbox: ok (", "read it back gone: ok ("):
        assert step in out
    assert f"ok: the runner ran on Python" in out and daytona_live.fake.toolbox.python in out
    created, = mine(daytona_live.fake, before)
    assert created["desiredState"] == "destroyed" and created["labels"]["runId"].startswith("check_")
    assert one("SELECT count(*) FROM control WHERE key LIKE 'provider_check:%%'") == 0


def test_local__the_same_check_on_this_machine(live_server, settings, tmp_path):
    settings.SCHEDULER_PUBLIC_API_URL = live_server.url
    settings.SCHEDULER_SANDBOX_DIR = str(tmp_path / "sandboxes")
    get_provider.cache_clear()
    code, out, err = check("local", "--wait", "60")
    get_provider.cache_clear()
    assert code == 0, out + err
    assert "read it back gone: ok" in out


def test_an_api_the_sandbox_cannot_reach__no_heartbeat__named_and_cleaned_up(daytona_live, settings):
    settings.SCHEDULER_PUBLIC_API_URL = f"http://127.0.0.1:{free_port()}"
    before = set(daytona_live.fake.sandboxes)
    code, out, err = check("daytona", "--routing-domain", "org-contract", "--wait", "3")
    assert code == 1
    assert err.strip().startswith("check_provider: FAILED at wait for the runner's heartbeat: API not reachable "
                                  "from the sandbox") and len(err.strip().splitlines()) == 1
    assert "SCHEDULER_PUBLIC_API_URL=http://127.0.0.1:" in err
    created, = mine(daytona_live.fake, before)
    assert created["desiredState"] == "destroyed"  # cleaned up
    assert one("SELECT count(*) FROM control WHERE key LIKE 'provider_check:%%'") == 0


@pytest.mark.requirement("PRV-7")
def test_an_unreachable_provider_api_and_a_refused_credential_are_named(settings):
    settings.SCHEDULER_DAYTONA_API_URL = f"http://127.0.0.1:{free_port()}/api"
    settings.SCHEDULER_DAYTONA_API_KEYS = {"org-x": "secret-key-123"}
    get_provider.cache_clear()
    code, out, err = check("daytona", "--routing-domain", "org-x", "--wait", "2")
    assert code == 1 and "FAILED at create the sandbox and start its runner: provider API not reachable" in err
    get_provider.cache_clear()


def test_a_refused_credential_is_named_without_the_key(daytona_live, settings):
    settings.SCHEDULER_DAYTONA_API_KEYS = {"org-contract": "not-the-key-456"}
    get_provider.cache_clear()
    code, out, err = check("daytona", "--routing-domain", "org-contract")
    assert code == 1 and "FAILED at create the sandbox and start its runner: credential refused" in err
    assert "not-the-key-456" not in out + err


def test_bad_arguments_are_one_line_and_write_nothing():
    for args in (["kubernetes"], ["daytona"], ["local", "--wait", "0"]):
        result = subprocess.run(manage_command("check_provider", *args), cwd=PROJECT_DIR, capture_output=True,
                                text=True, env=manage_env(current_database_url()), timeout=120)
        assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_interrupted_while_waiting__the_sandbox_is_deleted_and_nothing_kept(contract):
    """SIGINT as a user's Ctrl-C, to the command as a process, while it waits for a heartbeat that cannot come."""
    before = set(contract.fake.sandboxes)
    env = manage_env(current_database_url(), SCHEDULER_DAYTONA_API_URL=contract.api_url,
                     SCHEDULER_DAYTONA_API_KEYS='{"org-contract": "key-contract"}',
                     SCHEDULER_PUBLIC_API_URL=f"http://127.0.0.1:{free_port()}")
    process = subprocess.Popen(manage_command("check_provider", "daytona", "--routing-domain", "org-contract"),
                               cwd=PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stdout:
        if "create the sandbox and start its runner: ok" in line:
            break
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    created, = mine(contract.fake, before)
    assert created["desiredState"] == "destroyed"
    assert one("SELECT count(*) FROM control WHERE key LIKE 'provider_check:%%'") == 0


def test_a_runner_whose_check_is_over_records_nothing_and_is_told_to_stop(client):
    """A check's runner that reaches the API after its check ended (timed out, interrupted) leaves no row."""
    from scheduler.runs.tokens import mint_runner_token

    run_id = "check_" + "0" * 32
    auth = {"HTTP_AUTHORIZATION": f"Bearer {mint_runner_token(run_id, 1, 'lease-1')}"}
    identity = {"runId": run_id, "attempt": 1, "leaseToken": "lease-1"}
    beat = client.post("/internal/runner/heartbeat", identity, content_type="application/json", **auth)
    assert beat.status_code == 200 and beat.json()["current"] is False
    terminal = client.post("/internal/runner/terminal", {**identity, "result": {"status": "completed", "output": {}}},
                           content_type="application/json", **auth)
    assert terminal.status_code == 404
    unsigned = client.post("/internal/runner/heartbeat", identity, content_type="application/json")
    assert unsigned.status_code == 401  # a check's endpoints take the same runner token as any run's
    assert one("SELECT count(*) FROM control WHERE key LIKE 'provider_check:%%'") == 0


def test_without_the_schedulers_database_one_line_and_no_sandbox(contract):
    """The check keeps what its runner says in the database, so it stops before it creates anything without one."""
    before = set(contract.fake.sandboxes)
    env = manage_env("postgres://nobody@127.0.0.1:1/none", SCHEDULER_DAYTONA_API_URL=contract.api_url,
                     SCHEDULER_DAYTONA_API_KEYS='{"org-contract": "key-contract"}')
    result = subprocess.run(manage_command("check_provider", "daytona", "--routing-domain", "org-contract"),
                            cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == "CommandError: the scheduler's database is not reachable: OperationalError"
    assert set(contract.fake.sandboxes) == before
