"""The README's run command: scheduler_up serves /healthz and stops cleanly on SIGTERM."""

import json
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from tests.support import PROJECT_DIR, free_port, manage_command, manage_env

pytestmark = pytest.mark.django_db


def _wait_for_health(url: str, process: subprocess.Popen, deadline_seconds: float = 60) -> dict:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.loads(response.read())
        except OSError:
            time.sleep(0.2)
    raise AssertionError("scheduler_up never answered /healthz")


def _assert_the_admin_is_styled(port: int) -> None:
    """gunicorn serves the admin's collected CSS through WhiteNoise: hashed, compressed, cached for long."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=10) as response:
        page = response.read().decode()
    stylesheet = re.search(r'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', page)
    assert stylesheet, "the login page links no hashed admin stylesheet"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{stylesheet.group(1)}", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200 and response.headers["Content-Type"].startswith("text/css")
        assert response.headers.get("Content-Encoding") == "gzip"
        assert "max-age=315360000" in response.headers["Cache-Control"]


def test_scheduler_up__serves_healthz_then_stops_on_sigterm(scratch_db, tmp_path):
    port = free_port()
    process = subprocess.Popen(
        manage_command("scheduler_up", "--bind", f"127.0.0.1:{port}"),
        # Its sandboxes and its one-instance lock beside them: the test's own, not the checkout's .embedded.
        env=manage_env(scratch_db.url, SCHEDULER_SANDBOX_DIR=str(tmp_path / "sandboxes")), cwd=PROJECT_DIR,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert _wait_for_health(f"http://127.0.0.1:{port}/healthz", process)["status"] == "ok"
        _assert_the_admin_is_styled(port)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # the supervisor stops its children; a kill would orphan them
            try:
                process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
