"""The WSGI application gunicorn serves: the internal API through a short middleware chain, the rest through all.

Why: the internal API (runners, the control plane) is token-authenticated JSON; sessions, CSRF, users, messages
and frame options mean nothing to it, yet each middleware runs on every request and runners send many of them.
Cutting the chain to the security headers and Content-Length took about a tenth off a runner terminal's
server time. The admin, /healthz and /metrics keep the whole chain.
"""

from __future__ import annotations

from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler

INTERNAL_PREFIX = "/internal/"
# Security headers, and CommonMiddleware for the Content-Length of every answer (a keep-alive client then
# needs no chunked framing).
INTERNAL_MIDDLEWARE = ["django.middleware.security.SecurityMiddleware", "django.middleware.common.CommonMiddleware"]


class InternalAPIHandler(WSGIHandler):
    """Django's WSGI handler with INTERNAL_MIDDLEWARE instead of settings.MIDDLEWARE."""

    def load_middleware(self, is_async: bool = False) -> None:
        # load_middleware reads settings.MIDDLEWARE; this runs once, at start-up, before any request thread.
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = INTERNAL_MIDDLEWARE
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


def routed(full: WSGIHandler):
    """A WSGI application sending /internal/ to an InternalAPIHandler and everything else to `full`."""
    internal = InternalAPIHandler()

    def application(environ, start_response):
        if environ.get("PATH_INFO", "").startswith(INTERNAL_PREFIX):
            return internal(environ, start_response)
        return full(environ, start_response)

    return application
