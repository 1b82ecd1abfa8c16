"""What one tick of a worker returns: its counts, and whether its batch was full (River's "go again").

The domain's `run_once` functions return it; the loop (loop.py) reads it.
Kept apart from the loop so the domain never imports the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tick:
    counts: dict[str, int] = field(default_factory=dict)
    again: bool = False  # the batch was full: go again without sleeping
    # It found work but less than it could take: a loop with a cooldown waits out the rest of it, then looks again
    # (`again` or not), so what arrives meanwhile shares the next statement (River's fetch cooldown); a loop without
    # one goes by `again`.
    partial: bool = False
    # Seconds until the tick knows new work falls due (a schedule's next slot): the loop sleeps no longer.
    due_in: float | None = None
