"""Runner tokens (RUN-3, RUN-4): the credential a runner gets for exactly one run, attempt and lease.

A token names (run, attempt, lease token) and carries an HMAC-SHA256 under
the app's SECRET_KEY. The dispatcher mints one per claim; the API checks it
in constant time against the exact run, attempt and lease of each request.
"""

from __future__ import annotations

import base64
import json

from django.utils.crypto import constant_time_compare, salted_hmac

RUNNER_TOKEN_SALT = "scheduler.runner-token.v1"


class InvalidRunnerToken(Exception):
    """The token is malformed or its signature does not match; says nothing that helps a guesser."""


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
    """(run_id, attempt, lease_token) of a valid runner token, else InvalidRunnerToken."""
    try:
        version, payload, signature = token.split(".")
    except ValueError:
        raise InvalidRunnerToken() from None
    if version != "rt1" or not constant_time_compare(signature, _signature(payload)):
        raise InvalidRunnerToken()
    try:
        run_id, attempt, lease_token = json.loads(_unb64(payload))
    except (ValueError, TypeError):
        raise InvalidRunnerToken() from None
    return run_id, attempt, lease_token
