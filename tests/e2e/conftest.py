import pytest

from scheduler.providers.registry import get_provider


@pytest.fixture
def local_sandboxes(live_server, settings, tmp_path):
    """Runners in local process sandboxes reach this test's live server; providers are rebuilt."""
    settings.SCHEDULER_PUBLIC_API_URL = live_server.url
    settings.SCHEDULER_SANDBOX_DIR = str(tmp_path / "sandboxes")
    get_provider.cache_clear()
    yield live_server
    get_provider.cache_clear()
