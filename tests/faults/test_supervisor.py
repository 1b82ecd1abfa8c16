"""scheduler_up's supervisor: a child that exits is restarted, one that keeps failing stops everything, one instance only."""

import os
import signal
import sys
import threading

import pytest

from scheduler.stack.supervisor import AlreadyRunning, Child, Supervisor, single_instance


@pytest.fixture(autouse=True)
def _restore_signal_handlers():
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_a_child_that_exits__is_restarted_and_the_others_keep_running():
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    victim, bystander = Child("victim", sleeper), Child("bystander", sleeper)
    supervisor = Supervisor([victim, bystander], dict(os.environ), stop_timeout=5, restart_backoff_s=0.05)
    seen = {}

    def kill_then_watch():
        for _ in range(600):
            if victim.process is not None and bystander.process is not None:
                break
            threading.Event().wait(0.05)
        seen["victim"], seen["bystander"] = victim.process.pid, bystander.process.pid
        victim.process.send_signal(signal.SIGKILL)
        for _ in range(600):
            if victim.process is not None and victim.process.pid != seen["victim"]:
                seen["restarted"] = victim.process.pid
                break
            threading.Event().wait(0.05)
        seen["bystander_after"] = bystander.process.pid
        supervisor.stopping = True

    helper = threading.Thread(target=kill_then_watch)
    helper.start()
    assert supervisor.run() == 0
    helper.join()
    assert "restarted" in seen, "the killed child was never started again"
    assert seen["bystander_after"] == seen["bystander"]  # untouched while the other restarted
    assert victim.process.poll() is not None and bystander.process.poll() is not None  # stopped on the way out


def test_a_child_that_keeps_failing__stops_everything_non_zero_naming_it(caplog):
    failing = Child("flaky", [sys.executable, "-c", "import sys; sys.exit(3)"])
    steady = Child("web", [sys.executable, "-c", "import time; time.sleep(120)"])
    supervisor = Supervisor([failing, steady], dict(os.environ), stop_timeout=5, restart_backoff_s=0.01)
    assert supervisor.run() == 1
    assert supervisor.gave_up == "flaky"
    assert "flaky exited with 3 5 times in a row; stopping everything" in caplog.text
    assert steady.process.poll() is not None


def test_a_second_instance_on_the_same_directory__refused_naming_the_first(tmp_path):
    with single_instance(tmp_path):
        with pytest.raises(AlreadyRunning, match=f"already running on {tmp_path} \\(pid {os.getpid()}\\)"):
            with single_instance(tmp_path):
                pass
    with single_instance(tmp_path):  # released when the first ended
        pass
