"""ADM-1..6: release admission keys, epochs, read order, monotonic writes, the launch fence."""

import pytest

from scheduler.runs import admission
from scheduler.errors import InvalidInput, OpeningRefused, ReleaseClosed
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.requirement("ADM-1")
def test_keys__trimmed_and_environment_qualified():
    assert admission.admission_keys("  rel-1 ") == ["rel-1"]
    assert admission.admission_keys("rel-1", "preview") == ["preview:rel-1", "rel-1"]
    for bad in ("", "   ", None, 7):
        with pytest.raises(InvalidInput, match="releaseId"):
            admission.admission_keys(bad)
    with pytest.raises(InvalidInput, match="environment"):
        admission.admission_keys("rel", "staging")


@pytest.mark.requirement("ADM-2")
@pytest.mark.parametrize("epoch", [-1, 1.0, 1.5, "3", True, False, None, 2**53])
def test_epoch__anything_but_a_safe_non_negative_integer__refused_before_writing(epoch):
    with pytest.raises(InvalidInput, match="admissionEpoch"):
        admission.set_admission("rel", False, epoch)
    assert factories.query("SELECT * FROM runtime_release_admission") == []


@pytest.mark.requirement("ADM-2")
def test_epoch__largest_safe_integer__accepted():
    assert admission.set_admission("rel", False, 2**53 - 1).admission_epoch == 2**53 - 1


@pytest.mark.requirement("ADM-3")
def test_read__highest_epoch_wins_and_closed_wins_a_tie():
    assert admission.read_admission("rel") is None
    factories.query(
        "INSERT INTO runtime_release_admission (release_id, accepting, admission_epoch) VALUES "
        "('production:rel', true, 5), ('rel', false, 5), ('preview:rel', true, 9)"
    )
    assert admission.read_admission("rel", "production") == admission.Admission(False, 5)
    assert admission.read_admission("rel", "preview") == admission.Admission(True, 9)


@pytest.mark.requirement("ADM-4")
def test_close__stale_epoch_is_a_silent_no_op():
    admission.set_admission("rel", False, 10)
    assert admission.set_admission("rel", False, 3) == admission.Admission(False, 10)
    assert admission.set_admission("rel", True, 11) == admission.Admission(True, 11)


@pytest.mark.requirement("ADM-4")
def test_open__refused_on_one_key__leaves_no_key_opened():
    admission.set_admission("rel", False, 10, "production")
    factories.query("DELETE FROM runtime_release_admission WHERE release_id = 'rel'")
    with pytest.raises(OpeningRefused, match='"rel" at epoch 5'):
        admission.set_admission("rel", True, 5, "production")
    rows = factories.query("SELECT release_id, accepting, admission_epoch FROM runtime_release_admission ORDER BY 1")
    assert rows == [("production:rel", False, 10)]


@pytest.mark.requirement("ADM-5")
def test_launch__closed_release__refused_and_nothing_written():
    admission.set_admission("rel", False, 1)
    before = factories.table_state()
    with pytest.raises(ReleaseClosed):
        factories.launch(launch={"absurdReleaseId": "rel"})
    assert factories.table_state() == before


@pytest.mark.requirement("ADM-5")
def test_launch__open_or_unknown_release__admitted():
    admission.set_admission("rel", True, 1)
    assert factories.launch(launch={"absurdReleaseId": "rel"})
    assert factories.launch(launch={"absurdReleaseId": "never-seen"})


@pytest.mark.requirement("ADM-6")
def test_with_closed_release__runs_only_while_closed_at_epoch():
    calls = []
    assert admission.with_closed_release_admission("rel", 1, lambda: calls.append(1)).guarded is False
    admission.set_admission("rel", False, 4)
    assert admission.with_closed_release_admission("rel", 5, lambda: calls.append(5)).guarded is False
    guarded = admission.with_closed_release_admission("rel", 4, lambda: "done")
    assert (guarded.guarded, guarded.value) == (True, "done")
    with pytest.raises(InvalidInput):
        admission.with_closed_release_admission("rel", -1, lambda: None)
    assert calls == []
