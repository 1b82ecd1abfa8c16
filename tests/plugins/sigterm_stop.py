"""A SIGTERM ends the test session, as it ends every other process here.

Why: the embedded server's handler (config/embedded_pg.py) turns SIGTERM into SystemExit so that its atexit
stop runs. Raised inside a test, pytest reports SystemExit as that test's failure and goes on, so `timeout`'s
or a CI runner's SIGTERM failed the test that was running and left the rest of the suite to run. Here a
SIGTERM asks pytest itself to stop: the running test's fixtures are finalised, the session ends with 128 + 15,
and the interpreter's exit then runs the embedded server's stop as before.
"""

from __future__ import annotations

import signal
import threading

import pytest


def _stop_the_session(signum, frame):
    pytest.exit(f"stopped by signal {signum} ({signal.Signals(signum).name})", returncode=128 + signum)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Installed whatever handler came first: the embedded server's (settings may have started it already) would
    # only fail the running test.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_the_session)
