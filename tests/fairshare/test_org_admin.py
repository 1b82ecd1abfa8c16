"""FSH-10 in the admin and /metrics: an org's page shows what it holds and edits its limits through the audited
statement; the dashboard lists paused and throttled orgs with links; /metrics has bounded per-org gauges."""

import html
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from scheduler.api import views_metrics
from scheduler.fairshare import limits
from tests import factories
from tests.factories import one, query

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def test_an_orgs_page__shows_active_and_queued__a_save_goes_through_the_audited_statement(admin_client):
    factories.launch(org_id="org-a")
    limits.change("org-a", limits.LimitsChange(max_active=5), actor="test")
    page = admin_client.get(reverse("admin:scheduler_orglimit_change", args=["org-a"])).content.decode()
    assert "Queued runs" in page and "Active runs" in page
    response = admin_client.post(reverse("admin:scheduler_orglimit_change", args=["org-a"]),
                                 {"max_active": "2", "max_starts_per_minute": "", "reason": "noisy", "paused": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert one("SELECT max_active, max_starts_per_minute, paused, reason, updated_by FROM org_limits") == \
        (2, None, True, "noisy", "admin:ops")
    assert query("SELECT actor, action, target FROM operator_actions ORDER BY id")[-1] == \
        ("admin:ops", "org_limits_set", "org:org-a")


def test_an_operator_without_the_permission__sees_but_cannot_change(client):
    user = User.objects.create_user("viewer", "v@example.com", "pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_orglimit"))
    client.force_login(user)
    limits.change("org-a", limits.LimitsChange(max_active=5), actor="test")
    assert client.get(reverse("admin:scheduler_orglimit_changelist")).status_code == 200
    client.post(reverse("admin:scheduler_orglimit_change", args=["org-a"]), {"max_active": "9"})
    assert one("SELECT max_active FROM org_limits") == 5


def test_pause_and_resume_actions(admin_client):
    limits.change("org-a", limits.LimitsChange(max_active=5), actor="test")
    changelist = reverse("admin:scheduler_orglimit_changelist")
    admin_client.post(changelist, {"action": "pause_orgs", "_selected_action": ["org-a"]})
    assert one("SELECT paused FROM org_limits") is True
    admin_client.post(changelist, {"action": "resume_orgs", "_selected_action": ["org-a"]})
    assert one("SELECT paused FROM org_limits") is False
    assert [row[0] for row in query("SELECT action FROM operator_actions ORDER BY id")][-2:] == [
        "org_limits_pause", "org_limits_resume"]


def test_the_dashboard_lists_paused_and_throttled_orgs_with_links(admin_client):
    factories.launch(org_id="org-paused")
    limits.change("org-paused", limits.LimitsChange(paused=True), actor="test")
    factories.launch(org_id="org-capped")
    limits.change("org-capped", limits.LimitsChange(max_active=0), actor="test")
    limits.change("org-idle", limits.LimitsChange(max_active=10), actor="test")
    page = admin_client.get("/admin/").content.decode()
    assert "org-paused: paused" in page and "org-capped: at its cap of 0" in page and "org-idle" not in page
    assert reverse("admin:scheduler_orglimit_change", args=["org-capped"]) in page


def test_a_dashboard_link_reaches_an_org_whose_id_reads_as_an_admin_escape(admin_client):
    """The admin unquotes `_40` to `@`: a link must carry the org id quoted, as the admin's own links do."""
    factories.launch(org_id="team_40x")
    limits.change("team_40x", limits.LimitsChange(paused=True), actor="test")
    page = admin_client.get("/admin/").content.decode()
    link = re.search(r'href="([^"]*orglimit/[^"]*)"', page).group(1)
    answer = admin_client.get(html.unescape(link))
    assert answer.status_code == 200 and "team_40x" in answer.content.decode()


def test_metrics__per_org_gauges__the_top_orgs_then_other(client, settings, monkeypatch):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    monkeypatch.setattr(views_metrics, "TOP_ORGS", 2)
    for org, count in (("org-a", 3), ("org-b", 2), ("org-c", 1), ("org-d", 1)):
        for _ in range(count):
            factories.launch(org_id=org)
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'scheduler_org_runs_queued{org="org-a"} 3.0' in text
    assert 'scheduler_org_runs_queued{org="org-b"} 2.0' in text
    assert 'scheduler_org_runs_queued{org="other"} 2.0' in text and 'org="org-c"' not in text
