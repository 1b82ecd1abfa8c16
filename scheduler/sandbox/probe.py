"""The built-in play `check_provider` runs (PRV-7): it proves the runner started in a sandbox it was carried into.

It lives in the runner's own package, so it needs nothing from the image but a Python 3.12+ interpreter.
"""

from __future__ import annotations

import platform
import sys


def hello(play_input):
    """Answers with the interpreter the sandbox gave the runner (what a user's plays will run on)."""
    name = play_input.get("name", "provider") if isinstance(play_input, dict) else "provider"
    return {"greeting": f"hello, {name}", "python": platform.python_version(), "executable": sys.executable}
