"""The read-only admin: every scheduler table renders, nothing is editable, launch secrets are redacted."""

import html
import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse

from scheduler.runs import settlement
from tests import factories
from tests.factories import query

pytestmark = pytest.mark.django_db

PAGES = ["run", "attemptrow", "outboxfact", "controlkey", "releaseadmission", "receiptrow", "cleanupjobrow",
         "legacycleanupjob", "cleanupevent", "billingjob", "billingitem", "schemaversion", "runledgerevent"]


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


@pytest.mark.parametrize("page", PAGES)
def test_changelist_renders_and_offers_no_add(admin_client, page):
    parked = factories.parked_run()
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    response = admin_client.get(f"/admin/scheduler/{page}/")
    assert response.status_code == 200
    assert f"/admin/scheduler/{page}/add/" not in response.content.decode()


def test_run_detail__launch_tokens_redacted(admin_client):
    run_id = factories.launch(launch={"executorToken": "exec-secret-123", "coordinatorInternalToken": "coord-secret-456",
                                      "absurdReleaseId": "rel-1"})
    # The admin escapes "_" in keys (run_24... would otherwise read as run$...), as its own links do.
    response = admin_client.get(reverse("admin:scheduler_run_change", args=[quote(run_id)]))
    assert response.status_code == 200, (response.status_code, response.get("Location"))
    page = response.content.decode()
    for secret in ("exec-secret-123", "coord-secret-456"):
        assert secret not in page, page[max(0, page.find(secret) - 300):page.find(secret) + 100]
    launch_field = page[page.find("field-launch_redacted"):][:2000]
    assert "&quot;executorToken&quot;: &quot;[redacted]&quot;" in launch_field, launch_field
    assert "&quot;coordinatorInternalToken&quot;: &quot;[redacted]&quot;" in launch_field, launch_field
    assert "rel-1" in launch_field, launch_field


def test_run_whose_id_reads_as_an_escape__its_admin_link_opens_it(admin_client):
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO runs (run_id, play_name, status, launch_json) VALUES ('run_24ab', 'p', 'queued', '{}')")
    listing = admin_client.get("/admin/scheduler/run/?q=run_24ab").content.decode()
    link = re.search(r'href="(/admin/scheduler/run/[^"]+/change/[^"]*)"', listing).group(1)
    page = admin_client.get(html.unescape(link))
    assert page.status_code == 200 and "run_24ab" in page.content.decode()


def test_run_detail__a_late_result_shown_as_finished_after_being_declared_lost(admin_client):
    from scheduler.runs import settlement

    parked = factories.parked_run(max_attempts=1)
    lost = {"status": "failed", "error": {"code": "runner_lost", "message": "gone"}, "verdict": "runner_lost"}
    settlement.settle_attempt(parked.run_id, 1, parked.lease_token, lost)
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result({"late": "answer"}))
    page = admin_client.get(reverse("admin:scheduler_run_change", args=[quote(parked.run_id)])).content.decode()
    field = page[page.find("field-late_results"):][:2000]
    assert "Finished after being declared lost" in field and "&quot;late&quot;: &quot;answer&quot;" in field, field


def test_run_detail__tells_the_whole_story_in_order(admin_client):
    from scheduler.outbox import drainer

    parked = factories.parked_run(provider="local")
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result({"n": 1}))
    # now() is the test transaction's start, earlier than the facts' clock times: let them be due.
    query("UPDATE outbox SET created_at = created_at - interval '1 minute' WHERE run_id = %s", [parked.run_id])
    drainer.run_once("story-drainer")
    page = admin_client.get(reverse("admin:scheduler_run_change", args=[quote(parked.run_id)])).content.decode()
    facts = page[page.find("field-story_facts"):][:4000]
    assert facts.index("run.created") < facts.index("run.started") < facts.index("run.waiting") < facts.index("run.completed")
    assert "undelivered" not in facts and "delivered" in facts
    attempts = page[page.find("field-story_attempts"):][:3000]
    assert "completed" in attempts and "&quot;n&quot;: 1" in attempts
    assert parked.sandbox_id in page[page.find("field-story_cleanup"):][:3000]
    ledger = page[page.find("field-story_ledger"):][:4000]
    assert f"{parked.run_id}:run.completed" in ledger, ledger


def test_run_list__attempt_of_max_error_and_filters(admin_client):
    failed = factories.parked_run(max_attempts=1, launch={"absurdReleaseId": "rel-list"})
    factories.report_terminal(failed.run_id, 1, failed.lease_token, factories.failed_result("play_failed", "it broke"))
    other = factories.launch(launch={"absurdReleaseId": "rel-other"})
    page = admin_client.get("/admin/scheduler/run/?release=rel-list").content.decode()
    row = page[page.find(f">{failed.run_id}<"):][:3000]
    assert "1 of 1" in row and "play_failed: it broke" in row
    assert other not in page


def test_run_detail__epoch_milliseconds_read_as_dates():
    from scheduler.admin.columns import with_dates

    assert with_dates({"startedAtMs": 1_767_225_600_000, "runtimeSandboxRef": {"sandboxId": "sb"},
                       "resources": [{"billingStartedAt": 0, "cpu": 1}]}) == {
        "startedAtMs": "2026-01-01 00:00:00.000 UTC", "runtimeSandboxRef": {"sandboxId": "sb"},
        "resources": [{"billingStartedAt": "1970-01-01 00:00:00.000 UTC", "cpu": 1}]}


def test_run_detail__receipts_in_step_order_and_the_receipts_list_filters_by_status(admin_client):
    from scheduler.runs import receipts

    parked = factories.parked_run()
    caller = receipts.Caller(parked.run_id, 1, parked.lease_token)
    [first] = receipts.claim(caller, ["reserve"])
    receipts.complete(caller, [receipts.Item("reserve", first.lease_id, {"sku": "X1"})])
    receipts.claim(caller, ["charge"], lease_ms=60_000)
    query("UPDATE receipts SET created_at = created_at + interval '1 second' WHERE key = 'charge'")
    page = admin_client.get(reverse("admin:scheduler_run_change", args=[quote(parked.run_id)])).content.decode()
    story = page[page.find("field-story_receipts"):][:4000]
    assert story.index("reserve") < story.index("charge")
    assert "&quot;sku&quot;: &quot;X1&quot;" in story and "s left" in story
    running = admin_client.get("/admin/scheduler/receiptrow/?status__exact=running").content.decode()
    assert "charge" in running and ">reserve<" not in running


@pytest.mark.requirement("CLN-5")
def test_cleanup_job_page__shows_the_first_accepted_delete_where_billing_ends(admin_client):
    """CLN-5: the first acceptance is readable between claims: the operator sees it on the job's page."""
    import datetime as dt

    from tests.cleanup.factories import event

    parked = factories.parked_run(provider="daytona", routing_domain="org-a")
    factories.report_terminal(parked.run_id, 1, parked.lease_token, factories.completed_result())
    listing = admin_client.get("/admin/scheduler/cleanupjobrow/").content.decode()
    [link] = re.findall(r'href="(/admin/scheduler/cleanupjobrow/[^"]+/change/[^"]*)"', listing)
    assert "not accepted a delete yet" in admin_client.get(html.unescape(link)).content.decode()
    accepted = dt.datetime(2026, 5, 1, 10, 0, 0, 250_000, tzinfo=dt.UTC)
    event(parked.sandbox_id, "provider_delete_accepted", accepted, run_id=parked.run_id, routing_domain="org-a",
          routingDomain="org-a")
    assert "2026-05-01 10:00:00.250 UTC for org-a" in admin_client.get(html.unescape(link)).content.decode()
