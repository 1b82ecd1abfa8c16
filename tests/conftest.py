import pytest

from tests.support import ScratchDatabase

pytest_plugins = ["tests.plugins.block_coverage"]


@pytest.fixture
def scratch_db():
    """An empty database of its own; migrations and DDL there cannot hurt other tests."""
    database = ScratchDatabase().create()
    try:
        yield database
    finally:
        database.drop()


@pytest.fixture(autouse=True)
def _stop_the_shared_settler():
    """A test that settled through the web path leaves no settler thread (and connection) behind."""
    yield
    from scheduler.runs import beats, launches, settler

    settler.close_shared()
    beats.close_shared()
    launches.close_shared()
