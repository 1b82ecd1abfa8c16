"""TSK-3 for operators: unfinished tasks by queue and status in /metrics; the runs list filters tasks by queue."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from scheduler.runs import lifecycle
from tests.taskbackend import tasks
from tests.taskbackend.support import TEST_TASKS

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def task_settings(settings):
    settings.TASKS = {"default": {**TEST_TASKS["default"], "QUEUES": ["default", "mail"]}}


def test_metrics__unfinished_tasks_by_queue_and_status(client, settings):
    settings.SCHEDULER_INTERNAL_TOKEN = "t"
    tasks.noop_task.enqueue()
    tasks.noop_task.enqueue()
    tasks.noop_task.using(queue_name="mail").enqueue()
    assert len(lifecycle.claim_queued_runs(1)) == 1
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    ready = sum(float(line.split()[-1]) for line in text.splitlines()
                if line.startswith('scheduler_tasks_unfinished{queue="default",status="READY"}')
                or line.startswith('scheduler_tasks_unfinished{queue="mail",status="READY"}'))
    assert ready == 2.0
    assert 'status="RUNNING"} 1.0' in text


def test_the_runs_list_filters_tasks_by_queue(client):
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "pw"))
    mail = tasks.noop_task.using(queue_name="mail").enqueue()
    other = tasks.noop_task.enqueue()
    page = client.get(reverse("admin:scheduler_run_changelist"), {"task_queue": "mail"}).content.decode()
    assert mail.id in page and other.id not in page
    assert "task queue" in page.lower()
