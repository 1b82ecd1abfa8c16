"""Issue 47: a cleanup tick's provider calls run concurrently, while what each answer means is written on the
tick's own connection as it arrives (CLN-4..7 unchanged)."""

import threading

import pytest
from django.db import connections

from scheduler.cleanup import sandbox_sweep
from scheduler.providers import DeleteOutcome, ProviderError, ReadBack
from scheduler.providers.base import SandboxProvider
from tests.cleanup.factories import v2
from tests.factories import one, query


class _Meeting(SandboxProvider):
    """Each delete waits until `parties` deletes are in flight together: called one by one, they never meet."""

    def __init__(self, parties: int):
        self.barrier = threading.Barrier(parties, timeout=30)
        self.threads: set[str] = set()

    def delete(self, ref):
        self.threads.add(threading.current_thread().name)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            raise ProviderError("the other deletes never came") from None
        return DeleteOutcome.ACCEPTED

    def read_back(self, ref):
        return ReadBack.DELETED


@pytest.mark.django_db
@pytest.mark.requirement("CLN-4")
def test_a_ticks_deletes_are_in_flight_together__and_all_complete():
    for index in range(4):
        v2(f"sb-{index}", provider="local", run_id=f"run-{index}")
    provider = _Meeting(4)

    tick = sandbox_sweep.run_once(["local"], "owner", provider_for=lambda name: provider, concurrency=4)

    assert tick.counts | {"adopted": 0} == {"claimed": 4, "accepted": 4, "confirmed": 4, "blocked": 0, "retried": 0,
                                            "adopted": 0}
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE status = 'deleted'") == 4
    assert threading.current_thread().name not in provider.threads


@pytest.mark.django_db
def test_one_at_a_time__the_calls_stay_on_the_ticks_thread():
    v2("sb-0", provider="local", run_id="run-0")
    provider = _Meeting(1)
    assert sandbox_sweep.run_once(["local"], "owner", provider_for=lambda name: provider,
                                  concurrency=1).counts["confirmed"] == 1
    assert provider.threads == {threading.current_thread().name}


class _Mixed(SandboxProvider):
    """One answer of each kind, by sandbox id."""

    def __init__(self, done_when_accepted: bool):
        self.delete_done_when_accepted = done_when_accepted

    def delete(self, ref):
        if ref.sandbox_id == "sb-absent":
            return DeleteOutcome.ALREADY_ABSENT
        if ref.sandbox_id == "sb-refused":
            raise ProviderError("no key for this organization", permanent=True)
        return DeleteOutcome.ACCEPTED

    def read_back(self, ref):
        return ReadBack.STILL_PRESENT if ref.sandbox_id == "sb-lingers" else ReadBack.DELETED


@pytest.mark.django_db
@pytest.mark.requirement("CLN-7")
def test_every_kind_of_answer_in_one_concurrent_tick__is_written_as_alone():
    for sandbox_id in ("sb-absent", "sb-refused", "sb-gone", "sb-lingers"):
        v2(sandbox_id, provider="local", run_id=f"run-{sandbox_id}")
    v2("sb-later", provider="daytona", run_id="run-later")
    doubles = {"local": _Mixed(True), "daytona": _Mixed(False)}

    tick = sandbox_sweep.run_once(["local", "daytona"], "owner", provider_for=doubles.__getitem__, concurrency=8,
                                  readback_delay_ms=60_000)

    assert dict(query("SELECT sandbox_id, status FROM sandbox_cleanup_jobs_v2")) == {
        "sb-absent": "deleted", "sb-refused": "blocked", "sb-gone": "deleted", "sb-lingers": "pending",
        "sb-later": "pending"}
    assert tick.counts | {"adopted": 0} == {"claimed": 5, "accepted": 3, "confirmed": 2, "blocked": 1, "retried": 2,
                                            "adopted": 0}
    events = query("SELECT sandbox_id, event_type FROM sandbox_cleanup_events_v2 "
                   "WHERE event_type <> 'provider_delete_requested' ORDER BY 1, 2")
    assert events == [("sb-absent", "provider_delete_confirmed"), ("sb-gone", "provider_delete_accepted"),
                      ("sb-gone", "provider_delete_confirmed"), ("sb-later", "provider_delete_accepted"),
                      ("sb-lingers", "provider_delete_accepted"), ("sb-refused", "provider_delete_failed")]
    assert one("SELECT available_at > now() + interval '50 seconds' FROM sandbox_cleanup_jobs_v2 "
               "WHERE sandbox_id = 'sb-later'") is True


class _Witness(SandboxProvider):
    """Reads, from its call thread's own connection, whether the acceptance was committed before the read-back."""

    def __init__(self):
        self.seen: list[int] = []

    def delete(self, ref):
        return DeleteOutcome.ACCEPTED

    def read_back(self, ref):
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE sandbox_id = %s "
                               "AND event_type = 'provider_delete_accepted'", [ref.sandbox_id])
                self.seen.append(cursor.fetchone()[0])
        finally:
            connections.close_all()
        return ReadBack.DELETED


@pytest.mark.django_db(transaction=True)
@pytest.mark.requirement("CLN-5")
def test_the_acceptance_is_written_before_the_read_back_is_asked():
    """Billing ends at the acceptance: it is recorded as the delete's answer arrives, not after the tick's calls."""
    for index in range(3):
        v2(f"sb-{index}", provider="local", run_id=f"run-{index}")
    witness = _Witness()
    assert sandbox_sweep.run_once(["local"], "owner", provider_for=lambda name: witness,
                                  concurrency=3).counts["confirmed"] == 3
    assert witness.seen == [1, 1, 1]
