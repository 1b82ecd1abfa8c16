"""CLN-3: two claimers adopting at once neither deadlock nor duplicate."""

import pytest

from scheduler.cleanup import obligations
from tests.cleanup.factories import event, legacy, v2
from tests.concurrency import threads
from tests.factories import one

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.requirement("CLN-3")
def test_two_adopters_at_once__no_deadlock_no_duplicate():
    for i in range(30):
        legacy(f"sb-{i}", routing_domain=None if i % 3 == 0 else "org-a")
        if i % 2 == 0:
            v2(f"sb-{i}", routing_domain="org-a", status="deleted")
            event(f"sb-{i}", "provider_delete_confirmed", "2026-05-01T10:00:00Z", providerOutcome="deleted", routingDomain="org-a")
        if i % 3 == 0:
            v2(f"sb-{i}", routing_domain=None)
    for _ in range(10):
        first, second = threads.run_together(lambda: obligations.claim(["daytona"], "a"), lambda: obligations.claim(["daytona"], "b"))
        first.get(), second.get()
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs WHERE status <> 'deleted'") == 15
    assert one("SELECT count(*) FROM (SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE status <> 'deleted' "
               "GROUP BY sandbox_id HAVING count(*) > 1) AS duplicated") == 0
    assert one("SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE status <> 'deleted'") == 15
