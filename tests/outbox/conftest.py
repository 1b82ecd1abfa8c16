import pytest

from scheduler import outbound
from scheduler.outbox.receivers import authority


@pytest.fixture(autouse=True)
def pooled_receiver_connections_closed():
    """Deliveries keep a pooled connection per receiver; a test's own thread closes them when it ends."""
    yield
    outbound.close_thread_transports()


@pytest.fixture(autouse=True)
def receiver_authorities_forgotten():
    """Tokens and run authorities are cached per process, keyed by run: each test starts without another's."""
    for cache in (authority.DISPATCH_TOKENS, authority.RUN_AUTHORITIES):
        cache.clear()
    authority._REFUSED_EXECUTOR_TOKENS.clear()
    yield
