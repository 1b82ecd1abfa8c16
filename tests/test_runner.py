"""The runner's HTTP client: transient failures are retried with backoff, refusals are not."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scheduler.sandbox import runner


def serve(statuses):
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            seen.append((self.path, self.headers.get("Authorization"), json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            status = statuses.pop(0) if statuses else 200
            body = json.dumps({"current": True}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def config(url):
    return runner.RunnerConfig({
        "SCHEDULER_API_URL": url, "SCHEDULER_RUNNER_TOKEN": "rt", "SCHEDULER_RUN_ID": "run-1",
        "SCHEDULER_ATTEMPT": "2", "SCHEDULER_LEASE_TOKEN": "lease", "SCHEDULER_HEARTBEAT_TIMEOUT_MS": "900",
    })


def test_post__retries_transient_failures_then_succeeds():
    server, seen = serve([503, 429, 200])
    try:
        answer = runner.post(config(f"http://127.0.0.1:{server.server_address[1]}"), "/internal/runner/heartbeat", {"x": 1})
    finally:
        server.shutdown()
        server.server_close()
    assert answer == {"current": True}
    assert len(seen) == 3 and all(auth == "Bearer rt" for _, auth, _ in seen)


def test_post__refusal_is_not_retried():
    server, seen = serve([409])
    try:
        answer = runner.post(config(f"http://127.0.0.1:{server.server_address[1]}"), "/internal/runner/terminal", {})
    finally:
        server.shutdown()
        server.server_close()
    assert answer is None and len(seen) == 1


def test_heartbeat_interval__a_third_of_the_timeout():
    assert config("http://x").heartbeat_interval == 0.3


def test_the_runner_spells_the_failure_codes_as_the_scheduler_does():
    from scheduler.kinds import FailureCode

    assert runner.PLAY_START_FAILED == FailureCode.PLAY_START_FAILED
    assert runner.UNSTORABLE_OUTPUT == FailureCode.UNSTORABLE_OUTPUT


def test_log_tail__the_last_bytes_without_nul(tmp_path):
    log = tmp_path / "runner.log"
    log.write_bytes(b"x" * 20_000 + b"last\x00line")
    tail = runner.log_tail(str(log))
    assert len(tail) == runner.LOG_TAIL_BYTES - 1 and tail.endswith("lastline")


def test_the_runner_and_the_step_api_need_only_the_standard_library():
    """What a sandbox image carries: scheduler/sandbox/, with no site-packages and Django not importable."""
    import subprocess
    import sys

    from tests.support import PROJECT_DIR

    probe = ("import pkgutil, sys; sys.path.insert(0, '.'); sys.modules['django'] = None; import scheduler.sandbox; "
             "[__import__(info.name) for info in pkgutil.walk_packages(scheduler.sandbox.__path__, 'scheduler.sandbox.')]; "
             "assert len([name for name in sys.modules if name.startswith('scheduler.sandbox.')]) >= 4; "
             "assert not [name for name, module in sys.modules.items() if module and name.split('.')[0] in ('django', 'psycopg', 'httpx')]")
    subprocess.run([sys.executable, "-S", "-c", probe], cwd=PROJECT_DIR, check=True, timeout=60)


def test_the_sandbox_package_imports_nothing_of_the_scheduler_outside_itself():
    """Its shared names live in scheduler/sandbox/protocol.py; the server imports them from there, never back."""
    import ast

    from tests.support import PROJECT_DIR

    outside = []
    for path in (PROJECT_DIR / "scheduler" / "sandbox").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            outside += [f"{path.name}: {name}" for name in names
                        if name.split(".")[0] == "scheduler" and not name.startswith("scheduler.sandbox")]
    assert outside == []


def test_step_refuses_the_schedulers_own_keys_before_any_request():
    import pytest

    from scheduler.sandbox import steps

    with pytest.raises(ValueError, match="sys:"):
        steps.step("sys:billing", lambda: 1)


def test_a_play_finishes_although_its_sandbox_folder_was_renamed_while_it_ran(tmp_path):
    """The local provider renames a sandbox's folder once the runner started; the play's output must survive it."""
    import os
    import subprocess
    import sys

    import psutil

    from tests.support import PROJECT_DIR, wait_for

    staging, renamed = tmp_path / "starting-run-1-2", tmp_path / "local-sandbox"
    staging.mkdir()
    server, seen = serve([])
    env = {**os.environ, "PYTHONPATH": str(PROJECT_DIR), "SCHEDULER_RUNNER_TOKEN": "rt",
           "SCHEDULER_API_URL": f"http://127.0.0.1:{server.server_address[1]}", "SCHEDULER_RUN_ID": "run-1",
           "SCHEDULER_ATTEMPT": "2", "SCHEDULER_LEASE_TOKEN": "lease", "SCHEDULER_HEARTBEAT_TIMEOUT_MS": "60000",
           "SCHEDULER_PLAY": json.dumps({"callable": "tests.plays:sleep"}),
           "SCHEDULER_PLAY_INPUT": json.dumps({"seconds": 1})}
    try:
        process = subprocess.Popen([sys.executable, "-m", "scheduler.sandbox.runner"], cwd=staging, env=env)
        wait_for(lambda: psutil.Process(process.pid).children(), "the play started")
        staging.rename(renamed)  # while the play sleeps, as LocalProvider.start does once the runner's pid is known
        assert process.wait(timeout=60) == 0
    finally:
        server.shutdown()
        server.server_close()
    terminal = [body for path, _, body in seen if path == "/internal/runner/terminal"]
    assert terminal[0]["result"]["status"] == "completed", terminal
    assert terminal[0]["result"]["output"] == {"slept": 1.0}
