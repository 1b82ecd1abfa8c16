"""Plays the tests launch (`{"callable": "tests.plays:NAME"}`): the sandbox finds them on PYTHONPATH."""

import time


def sleep(play_input):
    """Sleeps for input.seconds (default 1), then reports it."""
    seconds = float((play_input or {}).get("seconds", 1))
    time.sleep(seconds)
    return {"slept": seconds}


def fail(play_input):
    raise RuntimeError((play_input or {}).get("message", "the play failed on purpose"))


def slow_first_attempt(play_input):
    """Hangs on attempt 1 (so a test can kill its runner), finishes at once on later attempts."""
    import os

    if os.environ.get("SCHEDULER_ATTEMPT") == "1":
        time.sleep(600)
    return {"attempt": int(os.environ.get("SCHEDULER_ATTEMPT", "0"))}


def not_a_number(play_input):
    """Returns NaN deep in its output: JSON PostgreSQL cannot store."""
    return {"scores": [1.0, float("nan")]}


def nul_text(play_input):
    """Returns a string holding U+0000: text PostgreSQL cannot store."""
    return {"text": "before\x00after"}


def who_am_i(play_input):
    """Reports the play's uid and whether it can read another process's environment (input.pid)."""
    import os

    try:
        with open(f"/proc/{int((play_input or {}).get('pid', 1))}/environ", "rb"):
            readable = True
    except OSError:
        readable = False
    return {"uid": os.getuid(), "readsSchedulerEnvironment": readable}


def lingering_approval_order(play_input):
    """scheduler.plays.approval_order, leaving a process behind in its sandbox (as a real sandbox stays up until it is
    deleted): the cleanup of a suspended attempt then has a live sandbox to delete."""
    import subprocess

    from scheduler.plays import approval_order

    subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return approval_order(play_input)
