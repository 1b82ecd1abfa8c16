"""Checks for values that arrive as JSON or command-line arguments.

Each check returns the clean value or raises InvalidInput naming the field,
before anything is written.
"""

from __future__ import annotations

from typing import Any

from scheduler.errors import InvalidInput

MAX_SAFE_INTEGER = 2**53 - 1
_MISSING = object()


def field(body: dict, name: str, default: Any = _MISSING) -> Any:
    if name in body:
        return body[name]
    if default is _MISSING:
        raise InvalidInput(f"{name} is required")
    return default


def text(value: Any, name: str, *, optional: bool = False, max_length: int = 512) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    value = value.strip()
    if not value:
        raise InvalidInput(f"{name} must not be empty")
    if len(value) > max_length:
        raise InvalidInput(f"{name} must be at most {max_length} characters")
    return value


def integer(value: Any, name: str, *, minimum: int = 0, maximum: int = MAX_SAFE_INTEGER) -> int:
    """A JSON integer: booleans, floats (even 1.0) and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer")
    if value < minimum or value > maximum:
        raise InvalidInput(f"{name} must be between {minimum} and {maximum}")
    return value


def boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false")
    return value


def json_object(value: Any, name: str, *, optional: bool = False) -> dict | None:
    if value is None and optional:
        return None
    if not isinstance(value, dict):
        raise InvalidInput(f"{name} must be a JSON object")
    return value


def choice(value: Any, name: str, options: tuple[str, ...], *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if value not in options:
        raise InvalidInput(f"{name} must be one of {', '.join(options)}")
    return value


def admission_epoch(value: Any) -> int:
    """ADM-2: a non-negative integer that fits 53 bits, and nothing else."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > MAX_SAFE_INTEGER:
        raise InvalidInput(
            "admissionEpoch must be a non-negative integer of at most 2^53 - 1", code="invalid_admission_epoch"
        )
    return value
