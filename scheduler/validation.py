"""Checks for values that arrive as JSON or command-line arguments, shared by the API and the commands.

Each check returns the clean value or raises InvalidInput naming the field
(its JSON path), before anything is written. `storable` refuses what
PostgreSQL cannot store (U+0000 and lone surrogates in text, NaN and
infinities, absurd nesting) at the edge, so the database never discovers it
(and never quotes it, secrets around it included, in an error or a log).
What PostgreSQL cannot store is told by scheduler/sandbox/storable.py, which the runner shares.
"""

from __future__ import annotations

from typing import Any

from scheduler import messages
from scheduler.errors import InvalidInput
from scheduler.sandbox.storable import MAX_JSON_DEPTH, path, text_problem, unstorable  # noqa: F401 - the edge's depth limit too

MAX_SAFE_INTEGER = 2**53 - 1
MAX_INT32 = 2**31 - 1
_MISSING = object()


def storable(value: Any, where: str = "") -> Any:
    """`value`, or InvalidInput naming the path of what PostgreSQL cannot store."""
    found = unstorable(value, where)
    if found:
        at, problem = found
        raise InvalidInput(f"{at or 'body'} {problem}", field=at or None)
    return value


def field(body: dict, name: str, default: Any = _MISSING, *, at: str = "") -> Any:
    if name in body:
        return body[name]
    if default is _MISSING:
        raise InvalidInput(f"{path(at, name)} is required", field=path(at, name))
    return default


def text(value: Any, name: str, *, optional: bool = False, max_length: int = 512) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    value = value.strip()
    if not value:
        raise InvalidInput(f"{name} must not be empty", field=name)
    if len(value) > max_length:
        raise InvalidInput(f"{name} must be at most {max_length} characters", field=name)
    problem = text_problem(value)
    if problem:
        raise InvalidInput(f"{name} {problem}", field=name)
    return value


# SCD-7: the one rule for every id (a run, an org, a schedule, a release), wherever it arrives: a body field, a
# query parameter or a path. Never trimmed: an id a request names is the id it writes and reads. No `%`: in a path,
# a percent-escape that is not UTF-8 reaches the view as its own characters (`org%FF`), another id than meant.
MAX_ID_LENGTH = 256


def identifier(value: Any, name: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    if not value:
        raise InvalidInput(f"{name} must not be empty", field=name)
    if value != value.strip():
        raise InvalidInput(f"{name} must not start or end with whitespace", field=name)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(f"{name} must be at most {MAX_ID_LENGTH} characters", field=name)
    if "%" in value:
        raise InvalidInput(f"{name} must not contain %", field=name)
    problem = text_problem(value)
    if problem:
        raise InvalidInput(f"{name} {problem}", field=name)
    return value


def integer(value: Any, name: str, *, minimum: int = 0, maximum: int = MAX_SAFE_INTEGER) -> int:
    """A JSON integer: booleans, floats (even 1.0) and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer", field=name)
    if value < minimum or value > maximum:
        raise InvalidInput(f"{name} must be between {minimum} and {maximum}", field=name)
    return value


def boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false", field=name)
    return value


def json_object(value: Any, name: str, *, optional: bool = False) -> dict | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"{name} must be a JSON object", field=name)
    return value


def choice(value: Any, name: str, options: tuple[str, ...], *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if value not in options:
        raise InvalidInput(f"{name} must be one of {', '.join(options)}", field=name)
    return value


def admission_epoch(value: Any) -> int:
    """ADM-2: a non-negative integer that fits 53 bits, and nothing else."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > MAX_SAFE_INTEGER:
        raise InvalidInput(messages.ADMISSION_EPOCH_REQUIRED, code="invalid_admission_epoch", field="admissionEpoch")
    return value
