"""Outbound HTTP (outbound.py): what an httpx client did for the scheduler's calls still happens when they go
straight to a pooled transport: the environment's proxy, NO_PROXY, a User-Agent, timeouts, one connection."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from scheduler import outbound

TIMEOUT = httpx.Timeout(5.0, connect=2.0)


class Recorder:
    """An HTTP server recording each request line's target (absolute when it is asked as a proxy), its headers
    and the client's port; it answers 200 with a JSON body and keeps the connection open."""

    def __init__(self):
        self.seen: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.seen.append({"target": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "port": self.client_address[1]})
                body = json.dumps({"ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    server = Recorder()
    yield server
    outbound.close_thread_transports()
    server.close()


def post(url: str) -> httpx.Response:
    return outbound.request("POST", url, content=b"{}", headers={"Content-Type": "application/json"}, timeout=TIMEOUT)


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY"])
def test_a_call_goes_through_the_proxy_the_environment_names(recorder, monkeypatch, variable):
    monkeypatch.setenv(variable, recorder.url)
    response = post("http://receiver.example/internal/events")
    assert response.status_code == 200 and response.json() == {"ok": True}
    assert [seen["target"] for seen in recorder.seen] == ["http://receiver.example/internal/events"]


def test_a_host_no_proxy_lists_is_reached_directly(recorder, monkeypatch):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead_proxy = f"http://127.0.0.1:{unused.getsockname()[1]}"  # nothing listens there
    monkeypatch.setenv("HTTP_PROXY", dead_proxy)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert post(recorder.url + "/internal/events").status_code == 200
    assert [seen["target"] for seen in recorder.seen] == ["/internal/events"]


def test_calls_name_the_scheduler_and_reuse_one_connection(recorder):
    for _ in range(3):
        assert post(recorder.url + "/a").status_code == 200
    assert {seen["headers"]["user-agent"] for seen in recorder.seen} == {outbound.USER_AGENT}
    assert len(recorder.seen) == 3 and len({seen["port"] for seen in recorder.seen}) == 1


def test_a_receiver_that_never_answers_times_out_as_an_http_error(monkeypatch):
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts (the kernel does) and never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/x"
        with pytest.raises(httpx.ReadTimeout):
            outbound.request("POST", url, content=b"{}", headers={}, timeout=httpx.Timeout(0.2, connect=2.0))
    outbound.close_thread_transports()


def test_a_proxy_that_asks_for_credentials_gets_the_ones_its_url_carries(recorder, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", recorder.url.replace("http://", "http://relay:s%40cret@"))
    assert post("http://receiver.example/internal/events").status_code == 200
    assert recorder.seen[0]["headers"]["proxy-authorization"] == "Basic cmVsYXk6c0BjcmV0"  # relay:s@cret


def test_a_kept_connection_the_server_closed_is_replaced__not_failed(recorder):
    """Servers close idle keep-alive connections: the next call opens a new one instead of failing on the old."""
    accepted, closed = [], threading.Event()

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def serve():
            for _ in range(2):
                connection, _ = listener.accept()
                accepted.append(connection)
                connection.recv(65536)
                # Kept alive by its headers, then closed by the server (as an idle timeout does).
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                connection.close()
                closed.set()

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/x"
        assert post(url).status_code == 200
        assert closed.wait(5)  # the server closed the first connection (loopback delivers its FIN at once)
        assert post(url).status_code == 200
        server.join(5)
    assert len(accepted) == 2


def test_a_proxy_named_with_another_scheme_than_http_is_refused_as_an_http_error(recorder, monkeypatch):
    """The proxy is spoken to in plain HTTP (CONNECT carries TLS to the origin): an https:// or socks proxy URL
    fails the call with a clear httpx error instead of talking plain HTTP to it."""
    monkeypatch.setenv("HTTP_PROXY", "https://proxy.example:3128")
    with pytest.raises(httpx.UnsupportedProtocol, match="http://"):
        post("http://receiver.example/internal/events")
    assert recorder.seen == []


def test_a_thread_keeps_at_most_its_bound_of_connections__the_least_recently_used_closed(recorder, monkeypatch):
    """One connection per origin, but not one for every origin a drainer ever met: past the bound the least
    recently used is closed, and the one just reused is kept."""
    monkeypatch.setattr(outbound, "MAX_KEPT_PER_THREAD", 2)
    others = [Recorder(), Recorder()]
    try:
        first, second, third = recorder.url, others[0].url, others[1].url
        for url in (first, second, first, third):  # `second` is now the least recently used
            assert post(url + "/x").status_code == 200
        kept = outbound._THREAD.by_origin
        assert sorted(key[2] for key in kept) == sorted(int(url.rsplit(":", 1)[1]) for url in (first, third))
        assert post(first + "/x").status_code == 200
        assert len({seen["port"] for seen in recorder.seen}) == 1  # reused throughout
    finally:
        outbound.close_thread_transports()
        for other in others:
            other.close()


def test_a_kept_connection_numbered_past_1023_is_reused(recorder):
    """select() cannot watch a descriptor past FD_SETSIZE: a busy process would have reconnected on every call."""
    import os

    assert post(recorder.url + "/x").status_code == 200
    (connection,) = outbound._THREAD.by_origin.values()
    high = os.dup2(connection.sock.fileno(), 1500)
    moved = socket.socket(fileno=high)
    os.close(connection.sock.detach())
    connection.sock = moved
    assert post(recorder.url + "/x").status_code == 200
    assert len({seen["port"] for seen in recorder.seen}) == 1
