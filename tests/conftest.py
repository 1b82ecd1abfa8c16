import pytest

from tests.support import ScratchDatabase

pytest_plugins = ["tests.plugins.block_coverage", "tests.plugins.sigterm_stop"]


@pytest.fixture
def scratch_db():
    """An empty database of its own; migrations and DDL there cannot hurt other tests."""
    database = ScratchDatabase().create()
    try:
        yield database
    finally:
        database.drop()


@pytest.fixture(autouse=True)
def _stop_the_shared_batchers():
    """A test that settled, beat or launched through the web path leaves no group thread (or connection) behind."""
    yield
    from scheduler.runs.batcher import ProcessShared

    ProcessShared.close_all()
