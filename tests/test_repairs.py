"""Operator repairs: the workers' fenced statements on an operator's word, each with an audit row; fenced-out
repairs change nothing and say why; admin actions need their own permission."""

import pytest
from django.contrib.auth.models import Permission, User
from django.db import IntegrityError, transaction

from scheduler.operations import repairs
from tests import factories
from tests.cleanup.factories import v2
from tests.factories import one, query
from tests.outbox.factories import backlog_run
from tests.support import current_database_url, run_manage

pytestmark = pytest.mark.django_db


def audit():
    return query("SELECT actor, action, target, changed, outcome FROM operator_actions ORDER BY id")


def test_cancel_run__queued_now__then_nothing_changed__both_audited():
    run_id = factories.launch()
    first = repairs.cancel_run(run_id, "ops", "customer asked")
    again = repairs.cancel_run(run_id, "ops")
    assert (first.changed, first.outcome) == (True, "cancelled")
    assert (again.changed, again.outcome) == (False, "nothing changed: the run is already cancelled")
    assert [(row[1], row[2], row[3]) for row in audit()] == [("cancel_run", run_id, True), ("cancel_run", run_id, False)]
    assert one("SELECT reason FROM operator_actions ORDER BY id LIMIT 1") == "customer asked"


def test_requeue_and_unblock__through_their_fences():
    backlog_run("run-h", kinds=["run.progress"])
    event_id = one("SELECT event_id FROM outbox WHERE run_id = 'run-h'")
    assert repairs.requeue_outbox_head(event_id, "ops").changed is False  # not failed: the fence refuses
    query("UPDATE outbox SET failed_at = now() WHERE event_id = %s", [event_id])
    assert repairs.requeue_outbox_head(event_id, "ops").changed is True
    assert one("SELECT failed_at FROM outbox WHERE event_id = %s", [event_id]) is None
    v2("sb-b", provider="local", run_id="run-b", status="blocked")
    assert repairs.unblock_cleanup("local", "sb-b", None, "ops").changed is True
    assert one("SELECT status FROM sandbox_cleanup_jobs_v2 WHERE sandbox_id = 'sb-b'") == "pending"
    assert [row[3] for row in audit()] == [False, True, True]


def test_the_audit_trail_is_append_only():
    repairs.cancel_run("run_missing", "ops")
    with pytest.raises(IntegrityError), transaction.atomic():
        query("UPDATE operator_actions SET outcome = 'something else'")
    with pytest.raises(IntegrityError), transaction.atomic():
        query("DELETE FROM operator_actions")


@pytest.mark.django_db(transaction=True)  # the command's audit row is committed by another process
def test_commands__one_line_and_non_zero_when_nothing_changed():
    url = current_database_url()
    refused = run_manage("requeue_outbox_head", "no-such-fact", database_url_value=url)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == ["CommandError: requeue_outbox_head no-such-fact: nothing changed: "
                                                   "not a failed outbox head"]
    assert run_manage("unblock_cleanup", "kubernetes", "x", database_url_value=url).returncode != 0


@pytest.fixture
def operator(client):
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_run", "view_outboxfact"]))
    client.force_login(user)
    return user, client


def test_admin_action__needs_its_permission__then_runs_the_repair_with_an_audit_row(operator):
    user, client = operator
    run_id = factories.launch()
    assert "cancel_runs" not in client.get("/admin/scheduler/run/").content.decode()
    user.user_permissions.add(Permission.objects.get(codename="cancel_run"))
    user = User.objects.get(pk=user.pk)  # permissions are cached per user object
    client.force_login(user)
    assert "cancel_runs" in client.get("/admin/scheduler/run/").content.decode()
    response = client.post("/admin/scheduler/run/", {"action": "cancel_runs", "index": 0, "_selected_action": [run_id]}, follow=True)
    assert [str(message) for message in response.context["messages"]] == [f"cancel_run {run_id}: cancelled"]
    assert audit() == [("admin:operator", "cancel_run", run_id, True, "cancelled")]


def test_declare_runner_lost__through_the_sweeps_fences():
    parked = factories.parked_run(max_attempts=1)
    moved = factories.parked_run(max_attempts=1)
    declared = repairs.declare_runner_lost(parked.run_id, "ops", "host died")
    assert declared.changed and one("SELECT status FROM runs WHERE run_id = %s", [parked.run_id]) == "failed"
    assert repairs.declare_runner_lost(parked.run_id, "ops").changed is False  # settled: nothing to declare
    from scheduler.runs import lifecycle

    lifecycle.cancel_run(moved.run_id)  # a queued cancel is a fence the verdict respects
    refused = repairs.declare_runner_lost(moved.run_id, "ops")
    assert (refused.changed, one("SELECT status FROM runs WHERE run_id = %s", [moved.run_id])) == (False, "waiting")


def test_release_admission__close_then_refused_opening__audited():
    closed = repairs.set_release_admission("rel-r", False, 5, None, "ops")
    assert (closed.changed, closed.outcome) == (True, "closed at epoch 5")
    refused = repairs.set_release_admission("rel-r", True, 4, None, "ops")
    assert refused.changed is False and "opening refused" in refused.outcome
    assert [row[1] for row in audit()] == ["close_release", "open_release"]


def test_redrive_cleanup__a_waiting_pending_job_becomes_due__a_due_one_is_left_alone():
    v2("sb-w", provider="local", run_id="run-w")
    query("UPDATE sandbox_cleanup_jobs_v2 SET available_at = now() + interval '1 hour' WHERE sandbox_id = 'sb-w'")
    assert repairs.redrive_cleanup("local", "sb-w", None, "ops").changed is True
    assert one("SELECT available_at <= now() FROM sandbox_cleanup_jobs_v2 WHERE sandbox_id = 'sb-w'") is True
    assert repairs.redrive_cleanup("local", "sb-w", None, "ops").changed is False  # already due
