import pytest

from scheduler import outbound


@pytest.fixture(autouse=True)
def pooled_receiver_connections_closed():
    """Deliveries keep a pooled connection per receiver; a test's own thread closes them when it ends."""
    yield
    outbound.close_thread_transports()
