"""APP-3: a SCHEDULER_* Django setting given as a value (an int, a bool, a dict) or as text reaches the same parser
as its environment variable."""

from __future__ import annotations

import json
from typing import Any, Callable


def as_text(value: Any) -> str:
    """A Django setting's value in its environment variable's form, for the same parser."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


_PARSED: dict[tuple[str, Any], Any] = {}


def parsed_once(parse: Callable[[str, str], Any], key: str, value: Any) -> Any:
    """Parse once per (setting, value): some settings are read on every statement."""
    try:
        cache_key = (key, value if not isinstance(value, (dict, list)) else json.dumps(value, sort_keys=True))
    except TypeError:
        cache_key = None
    if cache_key is not None and cache_key in _PARSED:
        return _PARSED[cache_key]
    result = parse(key, as_text(value))
    if cache_key is not None:
        _PARSED[cache_key] = result
    return result
