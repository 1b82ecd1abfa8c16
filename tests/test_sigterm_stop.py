"""A SIGTERM stops the test session: the running test is ended and no later test runs (tests/plugins)."""

import os
import signal
import subprocess
import sys

from tests.support import PROJECT_DIR

# The embedded server's own SIGTERM handler, installed as the suite's settings install it: on its own it only
# fails the running test (SystemExit) and the session goes on.
SESSION = """
import sys
from pathlib import Path

from config import embedded_pg

embedded_pg.stop_on_sigterm()
LATER = Path(__file__).with_name("later_test_ran")


def test_waits_for_the_signal():
    print("waiting", flush=True)
    sys.stdin.readline()


def test_later():
    LATER.write_text("ran")
"""


def run_session(tmp_path, *plugin_options):
    (tmp_path / "test_session.py").write_text(SESSION)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-c", str(tmp_path / "pytest.ini"), "-s", "-q", "-p", "no:django",
         "-p", "no:randomly", "-p", "no:cacheprovider", "--noconftest", *plugin_options,
         str(tmp_path / "test_session.py")],
        cwd=PROJECT_DIR, env=dict(os.environ, PYTHONPATH=str(PROJECT_DIR)),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        for line in process.stdout:
            if line.strip().endswith("waiting"):
                break
        process.send_signal(signal.SIGTERM)
        output = process.stdout.read()
        return process.wait(timeout=60), output, (tmp_path / "later_test_ran").exists()
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_sigterm__ends_the_session_with_no_later_test(tmp_path):
    returncode, output, later_ran = run_session(tmp_path, "-p", "tests.plugins.sigterm_stop")
    assert returncode == 128 + signal.SIGTERM, output
    assert "stopped by signal 15 (SIGTERM)" in output
    assert not later_ran, output


def test_sigterm_without_the_plugin__the_session_went_on(tmp_path):
    # What the plugin is for: without it the signal fails one test and the next one still runs.
    returncode, output, later_ran = run_session(tmp_path)
    assert later_ran, output
    assert returncode == 1, output
