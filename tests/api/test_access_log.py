"""gunicorn's access log as configured (config/access_log.py): one lean line per request, never a header."""

import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.support import PROJECT_DIR, free_port, manage_env, wait_for

pytestmark = pytest.mark.django_db

BEARER = "runner-token-that-must-not-be-logged"


def _serve(tmp_path, database_url: str, *options: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_DIR / "config" / "gunicorn.conf.py"),
         "--bind", f"127.0.0.1:{port}", "--access-logfile", str(tmp_path / "access.log"), *options],
        cwd=PROJECT_DIR, env=manage_env(database_url, SCHEDULER_WEB_WORKERS="1"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return process, port


def _post_terminal(port: int) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/internal/runner/terminal", data=b"{}", method="POST",
                                     headers={"Authorization": f"Bearer {BEARER}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0  # not listening yet


def _lines(tmp_path, process: subprocess.Popen) -> list[str]:
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 0, errors
    return (tmp_path / "access.log").read_text().splitlines()


def test_each_request_logs_address_request_status_bytes_and_milliseconds_without_its_token(scratch_db, tmp_path):
    process, port = _serve(tmp_path, scratch_db.url)
    try:
        wait_for(lambda: _post_terminal(port) == 400, "gunicorn answering the bad terminal")
        assert _post_terminal(port) == 400
    finally:
        lines = _lines(tmp_path, process)
    assert lines and all(re.fullmatch(r'127\.0\.0\.1 "POST /internal/runner/terminal HTTP/1\.1" 400 \d+ \d+ms', line)
                         for line in lines), lines
    assert BEARER not in "\n".join(lines)


def test_an_operators_own_format_gets_gunicorns_logging(scratch_db, tmp_path):
    process, port = _serve(tmp_path, scratch_db.url, "--access-logformat", "%(m)s %(U)s -> %(s)s")
    try:
        wait_for(lambda: _post_terminal(port) == 400, "gunicorn answering the bad terminal")
    finally:
        lines = _lines(tmp_path, process)
    assert lines and set(lines) == {"POST /internal/runner/terminal -> 400"}, lines


def test_the_line_is_built_without_gunicorns_per_request_atoms(monkeypatch, capsys):
    import datetime as dt
    from types import SimpleNamespace

    from gunicorn.config import Config

    from config.access_log import AccessLogger

    settings = Config()
    settings.set("accesslog", "-")
    logger = AccessLogger(settings)
    # gunicorn's atoms (every header and environ entry, per request) are what the lean line exists to avoid.
    monkeypatch.setattr(AccessLogger, "atoms", lambda *args: pytest.fail("gunicorn's atoms were built"))
    environ = {"REMOTE_ADDR": "10.0.0.7", "REQUEST_METHOD": "POST", "RAW_URI": "/internal/runner/heartbeat",
               "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_AUTHORIZATION": f"Bearer {BEARER}"}
    logger.access(SimpleNamespace(status="200 OK", sent=57, headers=[]), None, environ, dt.timedelta(milliseconds=4))
    assert capsys.readouterr().out.strip().endswith('10.0.0.7 "POST /internal/runner/heartbeat HTTP/1.1" 200 57 4ms')
