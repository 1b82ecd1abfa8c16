"""How a fault is told and waited out: one line naming it, and a jittered backoff.

The loop, the drainer's failure policy and the cleanup sweep all back off
and all log a failed step as one line; this is that rule, written once, in a
module the domain may import without importing the loop.
"""

from __future__ import annotations

import random


def describe(error: BaseException) -> str:
    """One line: the error's class, the statement it ran in (db.py adds it as a note), its first message line.

    Messages of database and HTTP errors never carry launch secrets (they are
    redacted where they are raised); the note names the statement, never its
    parameters.
    """
    notes = [note for note in getattr(error, "__notes__", ()) if note.startswith("in SQL statement")]
    first_line = (str(error).strip().splitlines() or [""])[0][:300]
    where = f" ({notes[0]})" if notes else ""
    return f"{type(error).__module__}.{type(error).__qualname__}{where}: {first_line}"


def backoff_ms(failures: int, base_ms: float, cap_ms: float) -> float:
    """Exponential backoff with full jitter: uniform in [base, min(cap, base * 2^failures)]."""
    ceiling = min(cap_ms, base_ms * (2 ** max(0, failures)))
    return random.uniform(min(base_ms, ceiling), ceiling)
