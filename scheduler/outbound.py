"""Outbound HTTP of the scheduler's own calls (Daytona's API, deliveries to run receivers): each thread keeps one
kept-alive connection per origin (the standard library's http.client), and a call goes straight to it.

Why http.client and not httpx: with instant starts one dispatcher is CPU-bound on its three Daytona calls per
start. Through httpx's transport (already without a client's URL merging, cookies and redirects) the calls alone
reached about 500 starts a second from 32 threads; the same calls over http.client reached about 1,800 (the
`dispatch` benchmark replays them); each answer's header block is read without the email package (http_head.py).
These calls need little: connect and read timeouts, one TLS context
(tls.py), a User-Agent, HTTP(S)_PROXY / ALL_PROXY / NO_PROXY from the environment (an http:// proxy, with a
CONNECT tunnel for HTTPS origins), and a connection kept for the next call. Failures are raised as httpx's
errors (httpx.HTTPError and its kinds), which the callers and their messages already speak.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import socket
import ssl
import threading
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import httpx

from scheduler.http_head import QuickHTTPConnection, QuickHTTPSConnection
from scheduler.tls import client_ssl_context

USER_AGENT = "runtime-scheduler"
MAX_KEPT_PER_THREAD = 32  # kept connections a thread holds, one per origin, the least recently used closed first
_THREAD = threading.local()


@dataclass(frozen=True)
class Response:
    """An answer read in full: its status, headers (case-insensitive `get`) and body."""

    status_code: int
    headers: http.client.HTTPMessage
    content: bytes

    def json(self):
        return json.loads(self.content)


def request(method: str, url: str, *, headers: dict[str, str], timeout: httpx.Timeout,
            content: bytes | None = None) -> Response:
    """Send one request on this thread's kept connection to the URL's origin; the answer is read in full.

    Raises httpx.HTTPError (connect, read or write failure, timeout, a malformed answer) as a client would.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise httpx.UnsupportedProtocol(f"cannot send to {parts.scheme or 'a'} URL without a host")
    proxy = environment_proxy(url)
    connection = _connection(parts, proxy, timeout)
    # Through a proxy a plain-HTTP request names its absolute URL; a tunnel (HTTPS) and a direct call the path.
    target = url if proxy and parts.scheme == "http" else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    outgoing = {"User-Agent": USER_AGENT, **headers, **(_proxy_authorization(proxy) if target == url else {})}
    try:
        connection.request(method, target, body=content, headers=outgoing)
        answer = connection.getresponse()
        body = answer.read()
    except Exception as error:
        _drop(parts, proxy)
        raise _as_http_error(error, "read") from error
    if answer.will_close:
        _drop(parts, proxy)
    return Response(answer.status, answer.headers, body)


def close_thread_transports() -> None:
    """Close this thread's kept connections (a worker thread that stops)."""
    for connection in (getattr(_THREAD, "by_origin", None) or {}).values():
        connection.close()
    _THREAD.by_origin = {}


def _connection(parts, proxy: str | None, timeout: httpx.Timeout) -> http.client.HTTPConnection:
    """This thread's connection to the origin, kept from its last call unless the server closed it meanwhile."""
    by_origin = getattr(_THREAD, "by_origin", None)
    if by_origin is None:
        by_origin = _THREAD.by_origin = {}
    key = (parts.scheme, parts.hostname, parts.port, proxy)
    kept = by_origin.pop(key, None)
    if kept is not None and kept.sock is not None and not _readable(kept.sock):
        kept.sock.settimeout(timeout.read)
        by_origin[key] = kept  # now the most recently used
        return kept
    if kept is not None:
        kept.close()  # an idle connection with something to read was closed (or broken) by the server
    connection = new_connection(parts.scheme, parts.hostname, parts.port, proxy, timeout.connect)
    try:
        connection.connect()
    except Exception as error:
        connection.close()
        by_origin.pop(key, None)
        raise _as_http_error(error, "connect") from error
    connection.sock.settimeout(timeout.read)
    by_origin[key] = connection
    if len(by_origin) > MAX_KEPT_PER_THREAD:
        # A drainer that delivers to many receivers keeps the most recently used, not one for each ever met.
        by_origin.pop(next(iter(by_origin))).close()
    return connection


def new_connection(scheme: str, host: str, port: int | None, proxy: str | None,
                   connect_timeout: float | None) -> http.client.HTTPConnection:
    """An unconnected connection to the origin (through the proxy: to the proxy, tunnelled for HTTPS)."""
    if proxy:
        via = urlsplit(proxy)
        if via.scheme != "http" or not via.hostname:
            # http.client speaks to a proxy in plain HTTP (a CONNECT tunnel carries TLS to the origin).
            raise httpx.UnsupportedProtocol(f"the proxy the environment names must be an http:// URL, not "
                                            f"{via.scheme or 'one without a scheme'}://")
        address = (via.hostname, via.port or 80)
    else:
        address = (host, port or (443 if scheme == "https" else 80))
    if scheme == "https":
        connection = QuickHTTPSConnection(*address, timeout=connect_timeout, context=client_ssl_context())
        if proxy:
            connection.set_tunnel(host, port or 443, headers=_proxy_authorization(proxy))
        return connection
    return QuickHTTPConnection(*address, timeout=connect_timeout)


def _drop(parts, proxy: str | None) -> None:
    connection = (getattr(_THREAD, "by_origin", None) or {}).pop((parts.scheme, parts.hostname, parts.port, proxy), None)
    if connection is not None:
        connection.close()


def _readable(sock: socket.socket) -> bool:
    """Whether an idle kept connection has something to read: the server closed it (or broke the protocol)."""
    try:
        # poll, not select: select cannot watch a descriptor numbered past 1023, and a busy process has them.
        watch = select.poll()
        watch.register(sock, select.POLLIN)
        return bool(watch.poll(0))
    except (OSError, ValueError):
        return True


def _as_http_error(error: Exception, stage: str) -> Exception:
    """httpx's error for what went wrong (callers catch httpx.HTTPError); anything else as it is."""
    message = f"{type(error).__name__}: {error}"
    if isinstance(error, (socket.timeout, TimeoutError)):
        return httpx.ConnectTimeout(message) if stage == "connect" else httpx.ReadTimeout(message)
    if isinstance(error, (ssl.SSLError, ConnectionRefusedError, socket.gaierror)) or (
            stage == "connect" and isinstance(error, OSError)):
        return httpx.ConnectError(message)
    if isinstance(error, http.client.HTTPException):
        return httpx.RemoteProtocolError(message)
    if isinstance(error, OSError):
        return httpx.ReadError(message)
    return error


def _proxy_authorization(proxy: str | None) -> dict[str, str]:
    """Basic credentials for a proxy URL that carries them (http://user:secret@proxy:3128)."""
    if not proxy:
        return {}
    via = urlsplit(proxy)
    if via.username is None:
        return {}
    pair = f"{unquote(via.username)}:{unquote(via.password or '')}".encode()
    return {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}


PROXY_VARIABLES = ("http", "https", "all", "no")


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY or HTTP_PROXY by scheme, else ALL_PROXY, unless
    NO_PROXY lists its host), as urllib and httpx's client read them; None to connect directly.

    Read by name, lower case first as urllib does, not through urllib.request.getproxies(): that walks the whole
    environment on every call, and it was a tenth of a dispatcher's Python.
    """
    proxies = {}
    for kind in PROXY_VARIABLES:
        value = os.environ.get(f"{kind}_proxy") or os.environ.get(f"{kind.upper()}_PROXY")
        if value:
            proxies[kind] = value
    parts = urlsplit(url)
    if parts.hostname and "no" in proxies and urllib.request.proxy_bypass_environment(parts.hostname, proxies):
        return None
    return proxies.get(parts.scheme) or proxies.get("all") or None
