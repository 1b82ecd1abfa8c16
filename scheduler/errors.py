"""Errors the scheduler raises on purpose, each with an HTTP status and a code.

The API turns them into `{error, message}` JSON; commands print the message
as one line and exit non-zero. Messages never carry secrets.
"""


class SchedulerError(Exception):
    """`field` is the JSON path of the offending value (`input.items[3].name`), when one value is to blame."""

    status = 400
    code = "invalid_request"

    def __init__(self, message: str, code: str | None = None, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code


class InvalidInput(SchedulerError):
    status = 400
    code = "invalid_input"


class Unauthorized(SchedulerError):
    status = 401
    code = "unauthorized"


class NotFound(SchedulerError):
    status = 404
    code = "not_found"


class Conflict(SchedulerError):
    status = 409
    code = "conflict"


class ReleaseClosed(Conflict):
    code = "release_closed"


class OpeningRefused(Conflict):
    code = "opening_refused"


class LeaseMismatch(Conflict):
    code = "lease_mismatch"


class PayloadTooLarge(SchedulerError):
    status = 413
    code = "payload_too_large"
