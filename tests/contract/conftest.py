import dataclasses

import pytest

from scheduler import outbound
from scheduler.providers.registry import get_provider
from tests.contract import documents, prism
from tests.providers.fake_daytona import FakeDaytona

KEYS = {"key-contract": "org-contract", "key-other": "org-other"}


@dataclasses.dataclass
class Contract:
    fake: FakeDaytona
    api: prism.Prism
    toolbox: prism.Prism

    @property
    def api_url(self) -> str:
        return self.api.url


@pytest.fixture(scope="session")
def daytona_contract(tmp_path_factory):
    """The fake behind two Prism proxies serving Daytona's strict documents: the control plane, and the toolbox
    that the fake's sandboxes name as their toolboxProxyUrl. Its sandboxes really run their commands."""
    prism.require()
    directory = tmp_path_factory.mktemp("daytona-contract")
    api_document, toolbox_document = documents.write_strict_copies(directory)
    with FakeDaytona(KEYS, keep_alive=True, run_commands=True) as fake:
        api = prism.Prism(api_document, fake.url, directory / "api.log")
        toolbox = prism.Prism(toolbox_document, f"{fake.root}/toolbox", directory / "toolbox.log")
        fake.toolbox_url = toolbox.url
        try:
            yield Contract(fake, api, toolbox)
        finally:
            api.stop()
            toolbox.stop()


@pytest.fixture
def contract(daytona_contract):
    """The session's contract; a test fails if Prism refused anything during it (a request or an answer)."""
    before = len(daytona_contract.api.violations()), len(daytona_contract.toolbox.violations())
    yield daytona_contract
    outbound.close_thread_transports()
    refused = daytona_contract.api.violations()[before[0]:] + daytona_contract.toolbox.violations()[before[1]:]
    assert refused == [], "Prism refused what the documents do not allow:\n" + "\n".join(refused)


@pytest.fixture
def daytona_live(contract, live_server, settings):
    """The scheduler configured for the contract's Daytona, its runners reaching this test's live API."""
    settings.SCHEDULER_DAYTONA_API_URL = contract.api_url
    settings.SCHEDULER_DAYTONA_API_KEYS = {"org-contract": "key-contract"}
    settings.SCHEDULER_PUBLIC_API_URL = live_server.url
    get_provider.cache_clear()
    yield contract
    outbound.close_thread_transports()  # the kept connections of calls made on this thread (cleanup, read-back)
    get_provider.cache_clear()
