"""gunicorn's threaded worker, closing a connection without holding up its event loop.

Why: since gunicorn 26 the gthread worker closes a connection that is not kept alive as RFC 9112 section 9.6
asks (send FIN, read until the client closes, at most 2 s or 64 KB, then close), but it does so blocking, on
the one thread that accepts and dispatches every connection of the worker. Until the client's own close
arrives, no other request of that worker is accepted or answered. Runners send each request on a connection of
their own (urllib), so every runner request held its worker's loop for a round trip to the runner, and a
client that never closed held it for 2 s (measured: clients 20 ms away got 207 requests/s out of one worker,
against 771 with gunicorn 25; one client that kept its socket open delayed the next request by 1.95 s).

Here the same close is a state the loop polls: the write side is shut at once, whatever the client still
sends is read as it arrives, and the socket is closed on the client's end, at the byte cap or at the deadline.
At most `worker_connections` sockets linger at once (the oldest is closed outright beyond that, as gunicorn 25
did), so clients that never close cannot run the worker out of descriptors.

For a project served by gunicorn's threaded worker (`worker_class =
"scheduler.api.lingering_worker.LingeringThreadWorker"`); the app itself needs no gunicorn, and nothing imports
this module but gunicorn.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import time
from collections import deque
from functools import partial

from gunicorn.workers import gthread

# gunicorn's own bounds for a closing connection (util.close_graceful).
LINGER_SECONDS = 2.0
LINGER_BYTES = 65536


class _Closing:
    """A connection whose write side is shut, waiting for the client's end."""

    __slots__ = ("sock", "deadline", "drained")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock: socket.socket | None = sock
        self.deadline = deadline
        self.drained = 0


class LingeringThreadWorker(gthread.ThreadWorker):
    """ThreadWorker whose closing connections linger on the poller instead of on the loop's thread."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.closing: deque[_Closing] = deque()  # in deadline order: every entry gets the same delay
        self.lingering = 0  # entries of `closing` whose socket is still open

    def finish_request(self, conn, fs):
        # Only the plain close changes; keep-alive, deferral and failures stay gunicorn's.
        if fs.cancelled() or fs.exception() is not None or fs.result() is not False:
            return super().finish_request(conn, fs)
        self.nr_conns -= 1
        self.close_lingering(conn.sock)
        return None

    def close_lingering(self, sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
        except OSError:
            sock.close()
            return
        entry = _Closing(sock, time.monotonic() + LINGER_SECONDS)
        self.closing.append(entry)
        self.lingering += 1
        self.poller.register(sock, selectors.EVENT_READ, partial(self._drain, entry))
        while self.lingering > self.cfg.worker_connections:
            self._release(self.closing.popleft())

    def _drain(self, entry: _Closing, sock: socket.socket) -> None:
        try:
            while entry.drained < LINGER_BYTES:
                data = sock.recv(4096)
                if not data:
                    break
                entry.drained += len(data)
        except (BlockingIOError, ssl.SSLWantReadError):
            return  # more may come (a TLS socket says so with its own error): the poller calls again
        except OSError:
            pass
        self._release(entry)

    def _release(self, entry: _Closing) -> None:
        sock, entry.sock = entry.sock, None
        if sock is None:
            return
        self.lingering -= 1
        try:
            self.poller.unregister(sock)
        except (KeyError, ValueError, OSError):
            pass
        sock.close()

    def murder_keepalived(self, *args, **kwargs):
        """gunicorn's sweep of idle connections (every turn of the loop; from gunicorn 27 also all of them, `force`,
        as the worker stops), which here also closes the closing connections past their deadline."""
        super().murder_keepalived(*args, **kwargs)  # gunicorn 26's takes no `force`
        force = bool(args[0] if args else kwargs.get("force", False))
        now = time.monotonic()
        while self.closing and (force or self.closing[0].sock is None or self.closing[0].deadline <= now):
            self._release(self.closing.popleft())
