"""RET-1 for operators: finished runs an obligation keeps past retention, counted by reason on the dashboard (each
figure opening those runs) and in /metrics."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.history.seeds import finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def held_runs(settings):
    settings.SCHEDULER_RETENTION_DAYS = 30
    finished_run("run-undelivered", 40, fact_delivered=False)
    finished_run("run-unbilled", 50, billing="pending")
    finished_run("run-prunable", 60)


def test_metrics__held_past_retention_by_reason(client, settings, held_runs):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'scheduler_runs_held_past_retention{reason="undelivered_facts"} 1.0' in text
    assert 'scheduler_runs_held_past_retention{reason="billing_unfinalized"} 1.0' in text
    assert 'scheduler_runs_held_past_retention{reason="cleanup_pending"} 0.0' in text


def test_the_dashboard_counts_held_runs_and_links_to_them(client, held_runs):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    page = client.get(reverse("admin:index")).content.decode()
    assert "Held past retention (30 days)" in page
    link = f"{reverse('admin:scheduler_run_changelist')}?held=undelivered_facts"
    assert link in page
    listed = client.get(link).content.decode()
    assert "run-undelivered" in listed and "run-unbilled" not in listed and "run-prunable" not in listed
