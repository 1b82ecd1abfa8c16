from tests.e2e.conftest import local_sandboxes  # noqa: F401 - the same live server and local sandboxes
