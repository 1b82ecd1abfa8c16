"""PRV-4: every sandbox state Daytona's document lists is read on purpose, by the start, the sweep and cleanup."""

import pytest

from scheduler.providers import Inspection, ReadBack, SandboxRef
from scheduler.providers import daytona_states
from scheduler.providers.daytona import DaytonaProvider
from scheduler.providers.daytona_states import StartProgress
from tests.contract import documents
from tests.providers.fake_daytona import FakeDaytona

SCHEMAS = documents.load(documents.API)["components"]["schemas"]
STATES = SCHEMAS["SandboxState"]["enum"]

EXPECTED = {  # state: (what the sweep learns, what a start waiting for it does)
    "creating": (Inspection.RUNNING, StartProgress.WAITING),
    "restoring": (Inspection.RUNNING, StartProgress.WAITING),
    "destroyed": (Inspection.GONE, StartProgress.ENDED),
    "destroying": (Inspection.GONE, StartProgress.ENDED),
    "started": (Inspection.RUNNING, StartProgress.STARTED),
    "stopped": (Inspection.GONE, StartProgress.ENDED),
    "starting": (Inspection.RUNNING, StartProgress.WAITING),
    "stopping": (Inspection.GONE, StartProgress.ENDED),
    "error": (Inspection.GONE, StartProgress.FAILED),
    "build_failed": (Inspection.GONE, StartProgress.FAILED),
    "pending_build": (Inspection.RUNNING, StartProgress.WAITING),
    "building_snapshot": (Inspection.RUNNING, StartProgress.WAITING),
    "unknown": (Inspection.UNKNOWN, StartProgress.WAITING),
    "pulling_snapshot": (Inspection.RUNNING, StartProgress.WAITING),
    "archived": (Inspection.GONE, StartProgress.ENDED),
    "archiving": (Inspection.GONE, StartProgress.ENDED),
    "resizing": (Inspection.RUNNING, StartProgress.WAITING),
    "snapshotting": (Inspection.RUNNING, StartProgress.ENDED),
    "forking": (Inspection.RUNNING, StartProgress.ENDED),
    "pausing": (Inspection.RUNNING, StartProgress.ENDED),
    "paused": (Inspection.RUNNING, StartProgress.ENDED),
    "resuming": (Inspection.RUNNING, StartProgress.ENDED),
}


@pytest.mark.requirement("PRV-4")
def test_the_code_knows_exactly_the_documents_states():
    assert set(STATES) == daytona_states.DOCUMENTED == set(EXPECTED)
    assert set(SCHEMAS["SandboxDesiredState"]["enum"]) == daytona_states.DESIRED


@pytest.mark.requirement("PRV-4")
@pytest.mark.parametrize("state", STATES)
def test_each_documented_state_through_the_api(state):
    with FakeDaytona({"key-a": "org-a"}) as fake:
        fake.add("sb-1", "org-a", state=state)
        provider = DaytonaProvider(fake.url, {"org-a": "key-a"}, timeout=5)
        ref = SandboxRef("daytona", "sb-1", "org-a")
        inspection, progress = EXPECTED[state]
        if state != "destroyed":  # the server answers 404 for a destroyed sandbox: gone, as a 404 reads
            assert provider.inspect(ref) is inspection
            assert provider.read_back(ref) is ReadBack.STILL_PRESENT
        assert daytona_states.start_progress(fake.public(fake.sandboxes["sb-1"])) is progress


@pytest.mark.parametrize("state", ["started", "paused", "error", "unknown"])
def test_desired_destroyed_is_a_delete_accepted_gone_for_the_sweep_not_yet_deleted_for_cleanup(state):
    sandbox = {"id": "sb-1", "state": state, "desiredState": "destroyed"}
    assert daytona_states.inspection(sandbox) is (Inspection.UNKNOWN if state == "unknown" else Inspection.GONE)
    assert daytona_states.read_back(sandbox) is ReadBack.STILL_PRESENT
    assert daytona_states.start_progress(sandbox) is StartProgress.ENDED


def test_an_undocumented_state_is_never_guessed():
    sandbox = {"id": "sb-1", "state": "melting", "desiredState": "started"}
    assert daytona_states.inspection(sandbox) is Inspection.UNKNOWN
    assert daytona_states.read_back(sandbox) is ReadBack.UNKNOWN
    assert daytona_states.start_progress(sandbox) is StartProgress.UNDOCUMENTED
