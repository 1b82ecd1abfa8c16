"""Outbound HTTP of the scheduler's own calls (Daytona's API, deliveries to run receivers): each thread keeps one
pooled httpx transport per origin, and a call goes straight to it.

Why the transport and not an httpx.Client: a client wraps every call in URL merging, cookie extraction, auth
and redirect handling, none of which these calls use, and that wrapping was a sixth of a dispatcher's CPU. With
instant starts one dispatcher is CPU-bound on its three Daytona calls per start; sent to the transport, it
started 420-480 runs/s instead of 300-380. What a client did that these calls need is kept: connect and read
timeouts, one TLS context (tls.py), a User-Agent, and HTTP(S)_PROXY / NO_PROXY from the environment.
"""

from __future__ import annotations

import threading
import urllib.request
from urllib.parse import urlsplit

import httpx

from scheduler.tls import client_ssl_context

USER_AGENT = "runtime-scheduler"
_THREAD = threading.local()


def request(method: str, url: str, *, headers: dict[str, str], timeout: httpx.Timeout,
            content: bytes | None = None) -> httpx.Response:
    """Send one request on this thread's pooled connection to the URL's origin; the answer is read in full.

    Raises httpx.HTTPError (connect, read or write failure, timeout) as a client would.
    """
    outgoing = httpx.Request(method, url, content=content, headers={"User-Agent": USER_AGENT, **headers},
                             extensions={"timeout": timeout.as_dict()})
    response = _transport(outgoing.url).handle_request(outgoing)
    try:
        response.read()
    finally:
        response.close()
    return response


def close_thread_transports() -> None:
    """Close this thread's pooled connections (a worker thread that stops)."""
    for transport in (getattr(_THREAD, "by_origin", None) or {}).values():
        transport.close()
    _THREAD.by_origin = {}


def _transport(url: httpx.URL) -> httpx.HTTPTransport:
    by_origin = getattr(_THREAD, "by_origin", None)
    if by_origin is None:
        by_origin = _THREAD.by_origin = {}
    origin = (url.scheme, url.host, url.port)
    if origin not in by_origin:
        by_origin[origin] = httpx.HTTPTransport(verify=client_ssl_context(), proxy=environment_proxy(str(url)),
                                                limits=httpx.Limits(max_keepalive_connections=4))
    return by_origin[origin]


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY or HTTP_PROXY by scheme, else ALL_PROXY, unless
    NO_PROXY lists its host), as urllib and httpx's client read them; None to connect directly."""
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all") or None
