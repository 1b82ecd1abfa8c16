"""The fakes' request handler (tests/quiet_http.py) keeps http.server's rules where a client sees them: a
connection kept or closed as the request and the protocol say, a malformed request refused with 400, headers read
by name in any case; and it sends each answer in one write, which is what it is for. The fakes' server prints no
traceback for a client that vanished mid-request (the soak kills drainers under chaos), and still prints one for
any other error, which would be the fake's own."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading

import pytest

from tests.outbox.fake_receiver import FakeReceiver
from tests.providers.fake_daytona import FakeDaytona
from tests.quiet_http import QuietHandler, QuietHTTPServer


class _Echo(QuietHandler):
    writes: list[int] = []

    def setup(self):
        super().setup()
        wfile, writes = self.wfile, self.writes

        class Counted:
            def write(self, data):
                writes.append(len(data))
                return wfile.write(data)

            def __getattr__(self, name):
                return getattr(wfile, name)

        self.wfile = Counted()

    def do_GET(self):
        self.answer(200, (self.headers.get("x-probe") or "").encode(), {"X-Seen": self.request_version})


@pytest.fixture
def server():
    _Echo.writes = []
    httpd = QuietHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _until_closed(server, raw: bytes) -> bytes:
    """What the server answers to `raw` up to its closing the connection (a test that hangs here fails)."""
    with socket.create_connection(server.server_address, timeout=30) as sock:
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def _answers_on_one_connection(server, raw: bytes, count: int) -> list[int]:
    """Sends `raw` `count` times on one connection, reading each answer before the next request."""
    statuses = []
    with socket.create_connection(server.server_address, timeout=30) as sock:
        for _ in range(count):
            sock.sendall(raw)
            answer = http.client.HTTPResponse(sock)
            answer.begin()
            answer.read()
            statuses.append(answer.status)
    return statuses


def test_an_http_1_1_client_keeps_its_connection_and_reads_headers_by_name(server):
    connection = http.client.HTTPConnection(*server.server_address, timeout=5)
    ports = []
    for probe in ("one", "two"):
        connection.request("GET", "/", headers={"X-PROBE": probe})
        answer = connection.getresponse()
        assert (answer.status, answer.read(), answer.getheader("X-Seen")) == (200, probe.encode(), "HTTP/1.1")
        assert answer.getheader("Date") and not answer.will_close
        ports.append(connection.sock.getsockname()[1])
    connection.close()
    assert ports[0] == ports[1]
    assert _Echo.writes and len(_Echo.writes) == 2  # each answer in one write: status line, headers and body


@pytest.mark.parametrize("raw", [b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", b"GET / HTTP/1.0\r\n\r\n"])
def test_a_request_that_asks_to_close_or_speaks_http_1_0_is_closed_after_its_answer(server, raw):
    assert _until_closed(server, raw).startswith(b"HTTP/1.1 200 OK\r\n")


def test_http_1_0_asking_keep_alive_keeps_its_connection(server):
    assert _answers_on_one_connection(server, b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 2) == [200, 200]


@pytest.mark.parametrize("raw", [b"GET /\r\n\r\n", b"GET / HTTP/2.0\r\n\r\n", b"NONSENSE\r\n\r\n"])
def test_a_malformed_request_line_is_refused_with_400_and_closed(server, raw):
    assert _until_closed(server, raw).startswith(b"HTTP/1.1 400 ")


def test_too_many_headers_are_refused_with_431(server):
    headers = b"".join(b"X-%d: v\r\n" % number for number in range(120))
    assert _until_closed(server, b"GET / HTTP/1.1\r\n" + headers + b"\r\n").startswith(b"HTTP/1.1 431 ")


@pytest.fixture(params=["receiver", "daytona"])
def fake_server(request):
    """Each fake's own server."""
    if request.param == "receiver":
        receiver = FakeReceiver()
        yield receiver._server
        receiver.close()
    else:
        with FakeDaytona({}) as daytona:
            yield daytona._server


@pytest.mark.parametrize("error", [ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), BrokenPipeError(),
                                   ConnectionResetError()])
def test_a_vanished_client_leaves_no_traceback(capsys, fake_server, error):
    try:
        raise error
    except OSError:
        fake_server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""


def test_any_other_error_is_still_printed(capsys, fake_server):
    try:
        raise ValueError("the fake's own defect")
    except ValueError:
        fake_server.handle_error(None, ("127.0.0.1", 1))
    assert "the fake's own defect" in capsys.readouterr().err
