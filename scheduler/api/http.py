"""JSON request parsing and error responses shared by every endpoint.

Bad input never reaches a statement: a body that is too large, not JSON or
not an object is refused with a 4xx `{error, message}` before anything runs.
"""

from __future__ import annotations

import functools
import json
import logging

import psycopg
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from scheduler.conf import scheduler_settings
from scheduler import db, validation
from scheduler.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge, SchedulerError, Unauthorized
from scheduler.faults import describe

# The database cannot be reached (down, restarting, connection lost): the client may retry.
# HA-1: a server that became a standby refuses writes (ReadOnlySqlTransaction) until the connection moves to the new
# primary (db.py closes it after the request): "retry later", like a server that cannot be reached.
UNAVAILABLE = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError,
               psycopg.errors.ReadOnlySqlTransaction)

logger = logging.getLogger("scheduler.api")


# Each domain error's HTTP answer (the most specific class listed wins); any other SchedulerError is a 400.
STATUSES = ((PayloadTooLarge, 413), (NotFound, 404), (Unauthorized, 401), (Conflict, 409), (InvalidInput, 400))


def status_of(error: SchedulerError) -> int:
    return next((status for kind, status in STATUSES if isinstance(error, kind)), 400)


def error_response(error: SchedulerError) -> JsonResponse:
    return JsonResponse({"error": error.code, "message": error.message, "field": error.field},
                        status=status_of(error))


def json_body(request, *, optional: bool = False) -> dict:
    """The request's JSON object, refused (4xx JSON, nothing run) when too large, not JSON, or not storable.

    `optional`: an empty body reads as {}.
    """
    limit = scheduler_settings.max_request_bytes
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise InvalidInput("Content-Length must be a number") from None
    if declared > limit:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes")
    raw = _chunked_body(request, limit)
    if raw is None:
        try:
            raw = request.body
        except RequestDataTooBig:
            raise PayloadTooLarge(f"request body is larger than {limit} bytes") from None
    if len(raw) > limit:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes")
    if optional and not raw.strip():
        return {}
    try:
        body = json.loads(raw or b"")
    except RecursionError:
        raise InvalidInput(f"request body nests deeper than {validation.MAX_JSON_DEPTH} levels",
                           code="invalid_json") from None
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("request body must be JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    return validation.storable(body)


def _chunked_body(request, limit: int) -> bytes | None:
    """SCD-7: a chunked body (no Content-Length), which Django reads as empty, read from the server's stream when the
    server has de-chunked it (gunicorn says so with wsgi.input_terminated); refused otherwise. None: not chunked."""
    if "chunked" not in request.META.get("HTTP_TRANSFER_ENCODING", "").lower() or request.META.get("CONTENT_LENGTH"):
        return None
    if not request.META.get("wsgi.input_terminated"):
        raise InvalidInput("this server cannot read a chunked body; send Content-Length", code="length_required")
    return request.META["wsgi.input"].read(limit + 1)


# SCD-7: each id a URL path names, with the field its errors name; checked by api_view before the view runs.
PATH_IDS = {"run_id": "runId", "org_id": "orgId", "schedule_id": "scheduleId", "release_id": "releaseId"}


def path_ids(kwargs: dict) -> dict:
    """The path's ids, each under the one id rule (which refuses `%`: Django keeps a percent-escape that is not
    UTF-8, `org%FF`, as those characters, and the request would name another id than its client meant)."""
    return {name: validation.identifier(value, PATH_IDS[name]) if name in PATH_IDS else value
            for name, value in kwargs.items()}


def path_attempt(value: str) -> int:
    """An attempt number taken from the URL path: a JSON 400 naming it (never a 404 page, never a 500 for
    digits int() refuses, such as a superscript two)."""
    if not (value.isascii() and value.isdigit() and len(value) <= 10) or not 1 <= int(value) <= validation.MAX_INT32:
        raise InvalidInput(f"attempt must be an integer between 1 and {validation.MAX_INT32}", field="attempt")
    return int(value)


def not_found(request, unknown_path: str = ""):
    """Anything else under /internal/: the JSON error shape, never Django's HTML page."""
    return error_response(NotFound(f"no endpoint {request.method} {request.path}", code="unknown_endpoint"))


def api_view(*methods: str):
    """Allow `methods`, turn SchedulerError into its JSON answer, exempt from CSRF (bearer auth)."""

    def decorate(view):
        @csrf_exempt
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in methods:
                response = JsonResponse(
                    {"error": "method_not_allowed", "message": f"use {' or '.join(methods)}", "field": None}, status=405
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                return view(request, *args, **path_ids(kwargs))
            except SchedulerError as error:
                return error_response(error)
            except UNAVAILABLE as error:
                logger.warning("api %s %s: database unavailable: %s", request.method, request.path, describe(error))
                db.drop_moved_connections()
                response = JsonResponse({"error": "database_unavailable", "field": None,
                                         "message": "the scheduler's database cannot be reached; retry later"}, status=503)
                response["Retry-After"] = "1"
                return response

        return wrapper

    return decorate
