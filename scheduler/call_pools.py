"""Thread pools for calls to a remote party (issue 47): a provider's deletes, a receiver's deliveries.

One pool per purpose and size for the process, so a loop's ticks reuse its
threads and with them each thread's kept connections (outbound.py keeps one
per origin and thread). A pool thread talks only to the remote party; what
the answers mean is written by the caller, on its own connection.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[tuple[str, int], ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared(purpose: str, size: int) -> ThreadPoolExecutor:
    """The process's pool of `size` threads for `purpose` (also the threads' name prefix)."""
    with _lock:
        if (purpose, size) not in _pools:
            _pools[(purpose, size)] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=purpose)
        return _pools[(purpose, size)]
