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
from scheduler.errors import InvalidInput, PayloadTooLarge, SchedulerError
from scheduler.loop import describe

# The database cannot be reached (down, restarting, connection lost): the client may retry.
UNAVAILABLE = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)

logger = logging.getLogger("scheduler.api")


def error_response(error: SchedulerError) -> JsonResponse:
    return JsonResponse({"error": error.code, "message": error.message}, status=error.status)


def json_body(request) -> dict:
    limit = scheduler_settings.max_request_bytes
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise InvalidInput("Content-Length must be a number") from None
    if declared > limit:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes") from None
    if len(raw) > limit:
        raise PayloadTooLarge(f"request body is larger than {limit} bytes")
    try:
        body = json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError):
        raise InvalidInput("request body must be JSON", code="invalid_json") from None
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object")
    return body


def api_view(*methods: str):
    """Allow `methods`, turn SchedulerError into its JSON answer, exempt from CSRF (bearer auth)."""

    def decorate(view):
        @csrf_exempt
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in methods:
                response = JsonResponse(
                    {"error": "method_not_allowed", "message": f"use {' or '.join(methods)}"}, status=405
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                return view(request, *args, **kwargs)
            except SchedulerError as error:
                if error.status >= 500:
                    logger.error("api %s %s: %s", request.method, request.path, error.code)
                return error_response(error)
            except UNAVAILABLE as error:
                logger.warning("api %s %s: database unavailable: %s", request.method, request.path, describe(error))
                response = JsonResponse({"error": "database_unavailable",
                                         "message": "the scheduler's database cannot be reached; retry later"}, status=503)
                response["Retry-After"] = "1"
                return response

        return wrapper

    return decorate
