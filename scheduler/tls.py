"""One TLS context for every pooled HTTP connection of this process (Daytona calls, run-ledger deliveries).

Why: building a context loads the CA bundle, about 20 ms of CPU with the GIL held (100 ms for the first), and
the scheduler keeps one pooled transport per origin and thread (outbound.py): a dispatcher's 32 start threads
each paid it on their first start, stalling the starts already in flight. An ssl.SSLContext is safe to share
between threads.
"""

from __future__ import annotations

import ssl
import threading

import httpx

_lock = threading.Lock()
_context: list[ssl.SSLContext] = []


def client_ssl_context() -> ssl.SSLContext:
    """httpx's own default verification (its CA bundle, SSL_CERT_FILE and SSL_CERT_DIR honoured), made once.

    Under a lock: the 32 start threads' first calls come at once, and each would otherwise build its own.
    """
    with _lock:
        if not _context:
            _context.append(httpx.create_ssl_context())
        return _context[0]
