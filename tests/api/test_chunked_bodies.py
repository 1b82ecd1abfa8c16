"""SCD-7: a chunked request body (no Content-Length) is read, not taken for an empty body; a server that cannot
de-chunk it gets a 400 saying so."""

import http.client
import io
import json
import signal
import subprocess
import sys

import pytest
from django.test import RequestFactory

from scheduler.api.http import json_body
from scheduler.errors import InvalidInput
from tests.support import PROJECT_DIR, free_port, manage_env, run_manage, wait_for

pytestmark = pytest.mark.django_db
TOKEN = "chunked-test-token"


def _chunked_request(terminated: bool):
    body = json.dumps({"playName": "tests.plays:fail"}).encode()
    return RequestFactory().generic("POST", "/internal/runs", b"", HTTP_TRANSFER_ENCODING="chunked",
                                    **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": terminated})


def test_a_chunked_body_the_server_de_chunked_is_read():
    request = _chunked_request(terminated=True)
    request.META.pop("CONTENT_LENGTH", None)
    assert json_body(request) == {"playName": "tests.plays:fail"}


def test_a_chunked_body_the_server_cannot_read_is_refused_not_read_as_empty():
    request = _chunked_request(terminated=False)
    request.META.pop("CONTENT_LENGTH", None)
    with pytest.raises(InvalidInput) as refused:
        json_body(request)
    assert refused.value.code == "length_required"


def _post_chunked(port: int, path: str, chunks: list[bytes]) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("POST", path)
        connection.putheader("Authorization", f"Bearer {TOKEN}")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        for chunk in chunks:
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_gunicorn_serves_a_chunked_launch(scratch_db, tmp_path):
    assert run_manage("migrate", "--no-input", database_url_value=scratch_db.url).returncode == 0
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_DIR / "config" / "gunicorn.conf.py"),
         "--bind", f"127.0.0.1:{port}"], cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=manage_env(scratch_db.url, SCHEDULER_WEB_WORKERS="1", SCHEDULER_INTERNAL_TOKEN=TOKEN), text=True)
    try:
        def answered():
            try:
                return _post_chunked(port, "/internal/runs", [b'{"playName": ', b'"tests.plays:fail", "orgId": "o"}'])
            except OSError:
                return None

        answer = wait_for(answered, "gunicorn answering")
        assert answer[0] == 201 and answer[1]["runId"].startswith("run_"), answer
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
