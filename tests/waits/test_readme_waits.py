"""WAIT-7: the README's durable-wait example, run as written (its port aside) against scheduler_up on a scratch
database: the play waits with its sandbox released, the POSTed approval resumes it, and it finishes."""

import re
import signal
import subprocess

import pytest

from tests.support import PROJECT_DIR, free_port, manage_command, manage_env
from tests.test_scheduler_up import _wait_for_health

pytestmark = pytest.mark.django_db
TOKEN = "readme-waits-token"


def readme_block() -> tuple[str, list[str]]:
    """The example's shell lines and the outputs its comments promise, from the README itself."""
    text = (PROJECT_DIR / "README.md").read_text()
    block = re.search(r"\n(    WAITING=\$\(curl.*?    # \{'by': 'ann'\})\n", text, re.S).group(1)
    lines = [line[4:] for line in block.splitlines()]
    return "\n".join(lines), [line[2:] for line in lines if line.startswith("# ")]


@pytest.mark.requirement("WAIT-7")
def test_the_readme_waiting_example_works_as_written(scratch_db, tmp_path):
    script, promised = readme_block()
    port = free_port()
    env = manage_env(scratch_db.url, SCHEDULER_SANDBOX_DIR=str(tmp_path / "sandboxes"),
                     SCHEDULER_INTERNAL_TOKEN=TOKEN, SCHEDULER_PUBLIC_API_URL=f"http://127.0.0.1:{port}")
    process = subprocess.Popen(manage_command("scheduler_up", "--bind", f"127.0.0.1:{port}", "--no-demo"), env=env,
                               cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for_health(f"http://127.0.0.1:{port}/healthz", process, 120)["status"] == "ok"
        shell = subprocess.run(["bash", "-eu", "-c", script.replace("localhost:8000", f"localhost:{port}")],
                               env={**env, "TOKEN": TOKEN}, capture_output=True, text=True, timeout=180)
        assert shell.returncode == 0, shell.stderr
        assert shell.stdout.replace("\n", "") == "".join(promised), (shell.stdout, promised)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
