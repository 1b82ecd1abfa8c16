"""launch_run, release_admission and mint_runner_token as a user runs them."""

import json

import pytest

from scheduler.runs.tokens import runner_claims
from tests.support import run_manage, current_database_url

pytestmark = pytest.mark.django_db(transaction=True)


def manage(*args):
    return run_manage(*args, database_url_value=current_database_url())


def test_launch_run__prints_the_run_id():
    result = manage("launch_run", "--play", "scheduler.plays:hello", "--org", "o", "--input", json.dumps({"n": 1}))
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    assert run_id.startswith("run_")
    status = manage("shell", "-c", f"from scheduler.runs import lifecycle; print(lifecycle.run_status('{run_id}').status)")
    assert status.stdout.strip().splitlines()[-1] == "queued"


@pytest.mark.requirement("FSH-5")
def test_launch_run__an_idempotency_key__the_repeat_prints_the_first_run__another_body_refused():
    """FSH-5 from a shell."""
    args = ["launch_run", "--play", "scheduler.plays:hello", "--org", "o", "--idempotency-key", "nightly-7"]
    first, again = manage(*args), manage(*args)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert again.stdout.strip() == first.stdout.strip() and "repeat of an earlier launch" in again.stderr
    conflict = manage(*args, "--input", "{}")
    assert conflict.returncode != 0 and "idempotencyKey" in conflict.stderr
    assert len(conflict.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (["--play", "scheduler.plays:hello", "--input", "{nope"], "--input must be JSON"),
    (["--play", "scheduler.plays:hello", "--launch", "[]"], "launch must be a JSON object"),
    (["--play", "scheduler.plays:hello", "--max-attempts", "0"], "maxAttempts must be between 1 and 100"),
])
def test_launch_run__bad_input__one_clear_line_and_non_zero(args, message):
    result = manage("launch_run", *args)
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_release_admission__close_show_open_and_refusals():
    assert manage("release_admission", "show", "rel-x").returncode == 1
    closed = manage("release_admission", "close", "rel-x", "--epoch", "3", "--environment", "production")
    assert closed.returncode == 0 and "closed at epoch 3" in closed.stdout
    shown = manage("release_admission", "show", "rel-x", "--environment", "production")
    assert "rel-x: closed at epoch 3" in shown.stdout
    refused = manage("release_admission", "open", "rel-x", "--epoch", "2", "--environment", "production")
    assert refused.returncode == 1 and "opening refused" in refused.stderr
    assert manage("release_admission", "open", "rel-x", "--epoch", "-1").returncode != 0
    assert manage("release_admission", "open", "rel-x").returncode != 0
    blocked = manage("launch_run", "--play", "scheduler.plays:hello", "--launch", json.dumps({"absurdReleaseId": "rel-x", "environment": "production"}))
    assert blocked.returncode == 1 and "closed" in blocked.stderr
    opened = manage("release_admission", "open", "rel-x", "--epoch", "4", "--environment", "production")
    assert opened.returncode == 0 and "accepting at epoch 4" in opened.stdout


def test_mint_runner_token__scoped_to_the_current_lease():
    run_id = manage("launch_run", "--play", "scheduler.plays:hello").stdout.strip()
    claim = manage("shell", "-c", "from scheduler.runs import lifecycle; c = lifecycle.claim_queued_runs(1)[0]; print(c.lease_token)")
    lease = claim.stdout.strip().splitlines()[-1]
    minted = manage("mint_runner_token", run_id, "1")
    assert minted.returncode == 0, minted.stderr
    assert runner_claims(minted.stdout.strip()) == (run_id, 1, lease)
    missing = manage("mint_runner_token", run_id, "2")
    assert missing.returncode == 1 and "not found" in missing.stderr
