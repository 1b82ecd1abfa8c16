"""gunicorn's application: the internal API answers through the short chain, the admin through the whole one."""

import io
import json

import pytest

pytestmark = pytest.mark.django_db


def call(application, path: str, method: str = "GET", body: bytes = b"") -> tuple[str, dict, bytes]:
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SERVER_NAME": "testserver", "SERVER_PORT": "80",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)),
               "CONTENT_TYPE": "application/json", "HTTP_HOST": "testserver"}
    response = application(environ, start_response)
    try:
        content = b"".join(response)
    finally:
        getattr(response, "close", lambda: None)()
    return seen["status"], seen["headers"], content


def test_internal_api__short_chain__same_json_answer():
    from config.wsgi import application

    status, headers, content = call(application, "/internal/runner/terminal", "POST", b"{}")
    assert status[:3] in ("400", "401") and json.loads(content)["error"]
    assert "X-Frame-Options" not in headers and "Vary" not in headers  # no clickjacking or session middleware
    assert headers["X-Content-Type-Options"] == "nosniff"  # the security headers stay
    assert headers["Content-Length"] == str(len(content))  # a keep-alive client needs no chunked framing


def test_admin__whole_chain():
    from config.wsgi import application

    status, headers, _ = call(application, "/admin/login/")
    assert status.startswith("200")
    assert headers["X-Frame-Options"] == "DENY" and "csrftoken" in headers.get("Set-Cookie", "")
