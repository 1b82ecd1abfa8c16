import pytest

from tests.support import ScratchDatabase


@pytest.fixture
def scratch_db():
    """An empty database of its own; migrations and DDL there cannot hurt other tests."""
    database = ScratchDatabase().create()
    try:
        yield database
    finally:
        database.drop()
