"""Errors the scheduler raises on purpose, each with a code and a message that never carries a secret.

They say what went wrong in the domain's words, not how a transport answers:
the API maps each kind to its HTTP status (api/http.py) and turns it into
`{error, message, field}` JSON; commands print the message as one line and
exit non-zero.
"""


class SchedulerError(Exception):
    """`field` is the JSON path of the offending value (`input.items[3].name`), when one value is to blame."""

    code = "invalid_request"

    def __init__(self, message: str, code: str | None = None, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code:
            self.code = code


class InvalidInput(SchedulerError):
    code = "invalid_input"


class Unauthorized(SchedulerError):
    code = "unauthorized"


class NotFound(SchedulerError):
    code = "not_found"


class Conflict(SchedulerError):
    code = "conflict"


class ReleaseClosed(Conflict):
    code = "release_closed"


class OpeningRefused(Conflict):
    code = "opening_refused"


class IdempotencyConflict(Conflict):
    """FSH-5: the launch's idempotency key already names a run launched with another body."""

    code = "idempotency_conflict"


class LeaseMismatch(Conflict):
    code = "lease_mismatch"


class PayloadTooLarge(SchedulerError):
    code = "payload_too_large"
