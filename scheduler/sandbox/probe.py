"""The built-in play `check_provider` runs (PRV-7): it proves the runner started in a sandbox it was carried into.

It lives in the runner's own package, so it needs nothing from the image but a Python 3.12+ interpreter.
"""

from __future__ import annotations

import platform
import sys
import time


def hello(play_input):
    """Answers with the interpreter the sandbox gave the runner (what a user's plays will run on), after holding
    `holdSeconds` so the runner heartbeats at least once while it runs."""
    play_input = play_input if isinstance(play_input, dict) else {}
    hold = play_input.get("holdSeconds", 0)
    if isinstance(hold, (int, float)) and 0 < hold <= 60:
        time.sleep(hold)
    return {"greeting": f"hello, {play_input.get('name', 'provider')}", "python": platform.python_version(),
            "executable": sys.executable}
