"""Who may call what: the internal bearer token, and runner tokens scoped to one lease (runs/tokens.py).

Failures say nothing that helps a guesser.
"""

from __future__ import annotations

from django.utils.crypto import constant_time_compare

from scheduler.conf import scheduler_settings
from scheduler.errors import Unauthorized
from scheduler.runs.tokens import InvalidRunnerToken, runner_claims

_UNAUTHORIZED = "missing or invalid credentials"


def _bearer(request) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized(_UNAUTHORIZED)
    return token.strip()


def require_internal_token(request) -> None:
    expected = scheduler_settings.internal_token
    presented = _bearer(request)
    # An unset token closes the control API instead of opening it.
    if not expected or not constant_time_compare(presented, expected):
        raise Unauthorized(_UNAUTHORIZED)


def require_runner(request, run_id, attempt, lease_token) -> None:
    """The token must name exactly this run, attempt and lease."""
    try:
        claims = runner_claims(_bearer(request))
    except InvalidRunnerToken:
        raise Unauthorized(_UNAUTHORIZED) from None
    if claims != (run_id, attempt, lease_token):
        raise Unauthorized(_UNAUTHORIZED)
