"""The web worker closes a connection that is not kept alive without holding up its other requests
(scheduler/api/lingering_worker.py): the FIN goes out at once, the socket waits for the client's close on the poller,
and it is closed when the client closes or at the deadline."""

import http.client
import os
import signal
import socket
import subprocess
import sys

import psutil
import pytest

from tests.support import PROJECT_DIR, free_port, manage_env, wait_for

pytestmark = pytest.mark.django_db

REQUEST = b"GET /internal/no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def _serve(tmp_path, database_url: str, linger_seconds: float, *options: str) -> tuple[subprocess.Popen, int]:
    """gunicorn as configured, one worker of two threads, closing connections linger `linger_seconds`.

    gunicorn's own blocking close is given the same long bound: were it back on the loop's thread, the next
    request would wait that long, past the client's timeout, and the test fail instead of merely running slow.
    """
    config = tmp_path / "gunicorn_linger.conf.py"
    config.write_text(
        f"exec(compile(open({str(PROJECT_DIR / 'config' / 'gunicorn.conf.py')!r}).read(), 'gunicorn.conf.py', 'exec'))\n"
        # Aliased: gunicorn reads every name a config file binds, and `config` is one of its settings.
        "import gunicorn.util as _util, scheduler.api.lingering_worker as _lingering\n"
        f"_util.close_graceful.__defaults__ = ({linger_seconds}, 65536)\n"
        f"_lingering.LINGER_SECONDS = {linger_seconds}\n")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(config), "--bind", f"127.0.0.1:{port}", *options],
        cwd=PROJECT_DIR, env=manage_env(database_url, SCHEDULER_WEB_WORKERS="1", SCHEDULER_WEB_THREADS="2"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: _answered(port), "gunicorn answering")
    return process, port


def _answered(port: int) -> int | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request("GET", "/internal/no-such-route")
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 0, errors


def _closing_client(port: int) -> socket.socket:
    """A client that asked for Connection: close, read the answer to the server's FIN, and keeps its socket."""
    client = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        client.sendall(REQUEST)
        answer = b""
        while chunk := client.recv(4096):  # ends at the server's FIN: its write side is shut right after answering
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 404"), answer[:80]
    except BaseException:
        client.close()
        raise
    return client


def _held(process: subprocess.Popen, client: socket.socket) -> list[tuple[int, int]]:
    """(worker pid, descriptor) of each open descriptor the worker has of `client`'s connection (none once closed)."""
    (worker,) = psutil.Process(process.pid).children()
    port = client.getsockname()[1]
    return [(worker.pid, each.fd) for each in worker.net_connections(kind="tcp") if each.raddr and each.raddr.port == port]


def _server_side(process: subprocess.Popen, client: socket.socket) -> tuple[str, str]:
    """The worker's descriptor of `client`'s connection: its /proc path and what it names (socket:[inode])."""
    ((pid, fd),) = _held(process, client)
    path = f"/proc/{pid}/fd/{fd}"
    return path, os.readlink(path)


def _closed(server_side: tuple[str, str]) -> bool:
    path, names = server_side
    try:
        return os.readlink(path) != names  # a later connection may reuse the number, never the inode
    except FileNotFoundError:
        return True


def test_a_client_that_keeps_its_socket_open_holds_up_no_other_request(scratch_db, tmp_path):
    process, port = _serve(tmp_path, scratch_db.url, linger_seconds=60)
    try:
        with _closing_client(port) as client:
            # The worker's one loop must accept and answer this one while the first still lingers.
            assert _answered(port) == 404
            lingering = _server_side(process, client)
            assert not _closed(lingering)
        # Well before the 60 s deadline: closed because its client closed.
        wait_for(lambda: _closed(lingering), "the worker closing the socket its client closed", seconds=30)
    finally:
        _stop(process)


def test_a_client_that_never_closes_is_closed_at_the_deadline(scratch_db, tmp_path):
    process, port = _serve(tmp_path, scratch_db.url, linger_seconds=0.5)
    try:
        with _closing_client(port) as client:
            # Whether or not this looks before the deadline passed: that it lingers at all is the first test's.
            wait_for(lambda: not _held(process, client), "the worker closing a lingering socket at its deadline")
    finally:
        _stop(process)


def test_no_more_sockets_linger_than_the_worker_takes_connections(scratch_db, tmp_path):
    process, port = _serve(tmp_path, scratch_db.url, 60, "--worker-connections", "3")
    clients, server_sides = [], []
    try:
        for _ in range(4):
            clients.append(_closing_client(port))
            server_sides.append(_server_side(process, clients[-1]))
        # The fourth pushed the oldest out, closed outright; the other three still wait for their clients.
        wait_for(lambda: _closed(server_sides[0]), "the oldest lingering socket closed", seconds=30)
        assert not any(_closed(side) for side in server_sides[1:])
    finally:
        for client in clients:
            client.close()
        _stop(process)
