"""What PostgreSQL's jsonb cannot store: U+0000 and lone surrogates in text, NaN and infinities, absurd nesting.

Both sides refuse such values before the database meets them: the API at the
edge (scheduler/validation.py), the runner and the step API on a play's
output. Standard library only, like all of scheduler/sandbox/.
"""

from __future__ import annotations

import math
from typing import Any

MAX_JSON_DEPTH = 64


def path(parent: str, key: str | int) -> str:
    """The JSON path of a child: `input.items[3].name`."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain the character U+0000"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain a lone surrogate (invalid Unicode)"
    return None


def unstorable(value: Any, where: str = "") -> tuple[str, str] | None:
    """(JSON path, what is wrong) of the first value PostgreSQL's jsonb cannot store, or None."""
    stack = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return at, f"nests deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return at, problem
        elif isinstance(item, float) and not math.isfinite(item):
            return at, "must be a finite number (not NaN or an infinity)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    return path(at, str(key)), "has a key that is not text (JSON object keys are strings)"
                if text_problem(key):
                    return path(at, key), "has a key PostgreSQL cannot store"
                stack.append((child, path(at, key), depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, path(at, index), depth + 1) for index, child in enumerate(item))
    return None
