"""Who may call what: the internal bearer token, and runner tokens scoped to one lease.

A runner token names (run, attempt, lease token) and is an HMAC-SHA256 under
the app's SECRET_KEY; it is checked in constant time and only against the
exact run, attempt and lease of the request. Failures say nothing that helps
a guesser.
"""

from __future__ import annotations

import base64
import json

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac

from scheduler.errors import Unauthorized

RUNNER_TOKEN_SALT = "scheduler.runner-token.v1"
_UNAUTHORIZED = "missing or invalid credentials"


def _bearer(request) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized(_UNAUTHORIZED)
    return token.strip()


def require_internal_token(request) -> None:
    expected = settings.SCHEDULER_INTERNAL_TOKEN
    presented = _bearer(request)
    # An unset token closes the control API instead of opening it.
    if not expected or not constant_time_compare(presented, expected):
        raise Unauthorized(_UNAUTHORIZED)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(payload: str) -> str:
    return _b64(salted_hmac(RUNNER_TOKEN_SALT, payload, algorithm="sha256").digest())


def mint_runner_token(run_id: str, attempt: int, lease_token: str) -> str:
    payload = _b64(json.dumps([run_id, attempt, lease_token], separators=(",", ":")).encode())
    return f"rt1.{payload}.{_signature(payload)}"


def runner_claims(token: str) -> tuple[str, int, str]:
    """(run_id, attempt, lease_token) of a valid runner token, else Unauthorized."""
    try:
        version, payload, signature = token.split(".")
    except ValueError:
        raise Unauthorized(_UNAUTHORIZED) from None
    if version != "rt1" or not constant_time_compare(signature, _signature(payload)):
        raise Unauthorized(_UNAUTHORIZED)
    try:
        run_id, attempt, lease_token = json.loads(_unb64(payload))
    except (ValueError, TypeError):
        raise Unauthorized(_UNAUTHORIZED) from None
    return run_id, attempt, lease_token


def require_runner(request, run_id, attempt, lease_token) -> None:
    """The token must name exactly this run, attempt and lease."""
    claims = runner_claims(_bearer(request))
    if claims != (run_id, attempt, lease_token):
        raise Unauthorized(_UNAUTHORIZED)
