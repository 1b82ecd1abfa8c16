import pytest

from scheduler.providers.registry import get_provider
from tests.providers.fake_daytona import FakeDaytona


@pytest.fixture
def daytona(settings):
    """A fake Daytona for organization org-1 (key-a), with the providers rebuilt around it."""
    with FakeDaytona({"key-a": "org-1"}) as fake:
        settings.SCHEDULER_DAYTONA_API_URL = fake.url
        settings.SCHEDULER_DAYTONA_API_KEYS = {"org-1": "key-a"}
        get_provider.cache_clear()
        yield fake
    get_provider.cache_clear()
