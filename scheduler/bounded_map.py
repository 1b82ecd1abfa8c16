"""A thread-safe map with a bound, for what a long-lived worker remembers per run or per sandbox (the drainer's
tokens, the Daytona client's organizations): without one, such a map grows by every run the process ever served.

When full, the entries `spent` says are of no more use leave first, then the least recently used (a dict keeps
insertion order, and a read or a write moves its entry to the end), down to three quarters of the bound, so the
writes after it are cheap again.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Hashable


class BoundedMap:
    def __init__(self, limit: int, spent: Callable[[Any], bool] = lambda value: False):
        self.limit = limit
        self._spent = spent
        self._entries: dict = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        with self._lock:
            value = self._entries.pop(key, None)
            if value is not None:
                self._entries[key] = value
            return value

    def put(self, key: Hashable, value) -> None:
        with self._lock:
            self._entries.pop(key, None)
            if len(self._entries) >= self.limit:
                self._shrink()
            self._entries[key] = value

    def pop(self, key: Hashable):
        with self._lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _shrink(self) -> None:
        for spent in [key for key, value in self._entries.items() if self._spent(value)]:
            del self._entries[spent]
        excess = len(self._entries) - self.limit * 3 // 4
        for oldest in list(itertools.islice(self._entries, max(excess, 0))):
            del self._entries[oldest]
