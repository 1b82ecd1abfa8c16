"""End to end on the local provider: a run completes, its sandbox is deleted and confirmed, billing ends at acceptance."""

import pytest

from scheduler.runs import dispatch, lifecycle
from scheduler.providers.base import SandboxProvider
from scheduler.providers.registry import get_provider
from scheduler.cleanup import billing_sweep
from scheduler.cleanup import sandbox_sweep
from tests import factories
from tests.factories import loads, one, query
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class DiesAfterTheDelete(SandboxProvider):
    """The local provider, but the worker 'dies' right after the provider took the delete."""

    def __init__(self):
        self.inner = get_provider("local")

    def delete(self, ref):
        return self.inner.delete(ref)

    def read_back(self, ref):
        raise KeyboardInterrupt("worker killed")


def finished_run():
    # The play leaves a process behind in its sandbox, so cleanup has something to delete.
    run_id = factories.launch(launch={"play": {"command": ["sh", "-c", "sleep 300 & exit 0"]}, "sandboxProvider": "local"})
    assert dispatch.run_once(5).counts["parked"] == 1
    wait_for(lambda: lifecycle.run_status(run_id).status == "completed", "the run completing")
    return run_id


def test_completed_run__sandbox_deleted_confirmed_and_billed_to_acceptance(local_sandboxes):
    run_id = finished_run()
    result = sandbox_sweep.run_once(["local"], "cleaner")
    assert (result.counts["accepted"], result.counts["confirmed"]) == (1, 1)
    status, deleted_at = one("SELECT status, deleted_at FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id])
    accepted_at = one("SELECT created_at FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_accepted'")
    assert status == "deleted" and deleted_at == accepted_at
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_confirmed'") == 1
    assert billing_sweep.run_once("biller").counts["finalized"] == 1
    ended = one("SELECT billing_ended_at FROM billing_items WHERE run_id = %s", [run_id])
    assert abs((ended - accepted_at).total_seconds()) < 0.001
    sandbox_id = loads(one("SELECT suspension_json FROM runs WHERE run_id = %s", [run_id]))["runtimeSandboxRef"]["sandboxId"]
    from scheduler.providers import ReadBack, SandboxRef

    assert get_provider("local").read_back(SandboxRef("local", sandbox_id)) is ReadBack.DELETED


def test_cleanup_worker_killed_mid_delete__a_later_pass_finishes__billed_once(local_sandboxes):
    import datetime as dt

    run_id = finished_run()
    with pytest.raises(KeyboardInterrupt):
        sandbox_sweep.run_once(["local"], "doomed", provider_for=lambda name: DiesAfterTheDelete())
    accepted_at = one("SELECT created_at FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_accepted'")
    assert one("SELECT status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == "pending"
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)  # past the dead worker's lease
    result = sandbox_sweep.run_once(["local"], "survivor", now=later)
    assert (result.counts["accepted"], result.counts["confirmed"]) == (0, 1)
    assert one("SELECT deleted_at FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id]) == accepted_at
    assert one("SELECT count(*) FROM sandbox_cleanup_events_v2 WHERE event_type = 'provider_delete_requested'") == 1
    billing_sweep.run_once("biller")
    query("UPDATE compute_billing_jobs_v2 SET status = 'pending', finalized_at = NULL")
    billing_sweep.run_once("biller")
    assert one("SELECT count(*) FROM billing_items WHERE run_id = %s", [run_id]) == 1


def launched_then_dispatcher_killed_before_park(monkeypatch, command: str) -> str:
    """A run whose dispatcher started its local sandbox and died before parking it."""
    run_id = factories.launch(launch={"play": {"command": ["sh", "-c", command]}, "sandboxProvider": "local"})

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("dispatcher killed before park")

    monkeypatch.setattr(dispatch.lifecycle, "park_all", killed)  # the pool parks through its group parker
    dispatch.run_once(1)  # the start's thread dies before parking, as its process would: claimed, never parked
    monkeypatch.undo()
    assert one("SELECT status FROM attempts WHERE run_id = %s", [run_id]) == "claimed"
    return run_id


def the_obliged_sandbox_is_deleted_by_cleanup(run_id: str) -> None:
    from scheduler.providers import ReadBack, SandboxRef

    (sandbox_id,) = [row[0] for row in query("SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id])]
    assert get_provider("local").read_back(SandboxRef("local", sandbox_id)) is ReadBack.STILL_PRESENT
    assert sandbox_sweep.run_once(["local"], "cleaner").counts["confirmed"] == 1
    assert get_provider("local").read_back(SandboxRef("local", sandbox_id)) is ReadBack.DELETED


def test_dispatcher_killed_between_start_and_park__the_sweep_finds_its_sandbox_and_cleanup_deletes_it(
        local_sandboxes, monkeypatch):
    import datetime as dt

    from scheduler.conf import scheduler_settings
    from scheduler.runs import liveness

    run_id = launched_then_dispatcher_killed_before_park(monkeypatch, "sleep 300")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=scheduler_settings.claim_lease_seconds + 1)
    assert liveness.run_once(now=later).counts["dispatch_lost"] == 1
    the_obliged_sandbox_is_deleted_by_cleanup(run_id)


def test_dispatcher_killed_before_park_but_the_runner_finishes__its_sandbox_still_cleaned(local_sandboxes, monkeypatch):
    from scheduler.runs import liveness

    # The play leaves a process behind, so the sandbox outlives the runner's report.
    run_id = launched_then_dispatcher_killed_before_park(monkeypatch, "sleep 300 & exit 0")
    wait_for(lambda: lifecycle.run_status(run_id).status == "completed", "the runner reporting")
    assert liveness.run_once().counts["unparked_reconciled"] == 1
    the_obliged_sandbox_is_deleted_by_cleanup(run_id)
