"""The read-only admin: every scheduler table renders, nothing is editable, launch secrets are redacted."""

import pytest
from django.contrib.auth.models import User

from scheduler import terminal
from tests import factories

pytestmark = pytest.mark.django_db

PAGES = ["run", "attemptrow", "outboxevent", "controlkey", "releaseadmission", "receiptrow", "cleanupjobrow",
         "legacycleanupjob", "cleanupevent", "billingjob", "billingitem", "schemaversion", "runledgerevent"]


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


@pytest.mark.parametrize("page", PAGES)
def test_changelist_renders_and_offers_no_add(admin_client, page):
    parked = factories.parked_run()
    terminal.ingest_runner_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    response = admin_client.get(f"/admin/scheduler/{page}/")
    assert response.status_code == 200
    assert f"/admin/scheduler/{page}/add/" not in response.content.decode()


def test_run_detail__launch_tokens_redacted(admin_client):
    run_id = factories.launch(launch={"executorToken": "exec-secret-123", "coordinatorInternalToken": "coord-secret-456",
                                      "absurdReleaseId": "rel-1"})
    response = admin_client.get(f"/admin/scheduler/run/{run_id}/change/")
    assert response.status_code == 200, (response.status_code, response.get("Location"))
    page = response.content.decode()
    for secret in ("exec-secret-123", "coord-secret-456"):
        assert secret not in page, page[max(0, page.find(secret) - 300):page.find(secret) + 100]
    launch_field = page[page.find("field-launch_redacted"):][:2000]
    assert "&quot;executorToken&quot;: &quot;[redacted]&quot;" in launch_field, launch_field
    assert "&quot;coordinatorInternalToken&quot;: &quot;[redacted]&quot;" in launch_field, launch_field
    assert "rel-1" in launch_field, launch_field
