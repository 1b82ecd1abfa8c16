"""GET /metrics (internal bearer token): the database gauges and the processes' histograms, via prometheus-client."""

import os

from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY

from scheduler import db, replica
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view

HELP = {
    "outbox_undelivered": "Outbox facts not yet delivered.",
    "outbox_failed_heads": "Failed heads blocking their run's lane until requeued.",
    "outbox_retrying": "Undelivered facts that failed at least once and will be retried.",
    "outbox_oldest_undelivered_seconds": "Age of the oldest undelivered outbox fact.",
    "runs_queued": "Runs waiting to be claimed.",
    "runs_active": "Runs running or waiting on a detached runner (not those waiting durably).",
    "cleanup_pending": "Sandbox cleanup obligations still to delete.",
    "cleanup_blocked": "Sandbox cleanup obligations blocked until an operator unblocks them.",
    "billing_pending": "Compute billing jobs not yet finalized.",
}


# FSH-10: per-org gauges name this many orgs (those holding the most runs); the rest are summed as "other".
TOP_ORGS = 20


def schedule_gauges():
    """SCD-7: schedules due, the lag of the oldest due slot, fires per outcome in the last hour."""
    from scheduler.kinds import FireOutcome

    row = db.fetch_one("schedule_metrics")
    yield GaugeMetricFamily("scheduler_schedules_due", "Unpaused schedules with a slot due now.", value=row["due"])
    yield GaugeMetricFamily("scheduler_schedules_oldest_due_seconds", "How late the oldest due slot is.",
                            value=float(row["oldest_due_seconds"]))
    fires = GaugeMetricFamily("scheduler_schedule_fires_last_hour", "Schedule slots recorded in the last hour.",
                              labels=["outcome"])
    for outcome in FireOutcome:
        fires.add_metric([outcome.value], float(row["fires_last_hour"].get(outcome.value, 0)))
    yield fires


def retention_gauges():
    """RET-1: finished runs past retention that pruning keeps, by the obligation that keeps them."""
    from scheduler.history import pruning

    held = GaugeMetricFamily("scheduler_runs_held_past_retention", "Finished runs past retention kept because an "
                             "obligation is open (a run may count under more than one reason).", labels=["reason"])
    for reason, count in pruning.held().items():
        held.add_metric([reason.value], float(count))
    yield held


def task_gauges():
    """TSK-3: unfinished tasks by queue and by the status get_result answers."""
    tasks = GaugeMetricFamily("scheduler_tasks_unfinished", "Tasks (django.tasks) not yet finished, by queue and "
                              "status (READY: queued; RUNNING: claimed to verdict).", labels=["queue", "status"])
    for row in db.fetch_all("tasks_metrics"):
        tasks.add_metric([row["queue"], row["status"]], float(row["tasks"]))
    yield tasks


def wait_gauges():
    """WAIT-7: the runs waiting durably by kind, and how long the oldest of each kind has waited."""
    from scheduler.kinds import WaitKind

    rows = {row["kind"]: row for row in db.fetch_all("waits_metrics")}
    waiting = GaugeMetricFamily("scheduler_runs_waiting", "Runs waiting durably (sandbox released), by what they "
                                "wait for.", labels=["kind"])
    oldest = GaugeMetricFamily("scheduler_runs_waiting_oldest_seconds", "How long the oldest run waiting durably "
                               "has waited, by kind.", labels=["kind"])
    overdue = GaugeMetricFamily("scheduler_runs_waiting_overdue", "Runs still waiting more than 10 s past their "
                                "deadline (no wait-timer loop resumed them), by kind.", labels=["kind"])
    for kind in WaitKind:
        row = rows.get(kind.value, {"runs": 0, "oldest_seconds": 0.0, "overdue": 0})
        waiting.add_metric([kind.value], float(row["runs"]))
        oldest.add_metric([kind.value], float(row["oldest_seconds"]))
        overdue.add_metric([kind.value], float(row["overdue"]))
    yield waiting
    yield oldest
    yield overdue


class DatabaseGauges:
    """Read at each scrape from one statement, so every web process reports the same figures."""

    def collect(self):
        with replica.replica_reads():  # RET-5: gauges may lag the primary by the replica's lag
            families = list(self._gauges())
        yield from families

    def _gauges(self):
        for name, value in db.fetch_one("scheduler_metrics").items():
            yield GaugeMetricFamily(f"scheduler_{name}", HELP[name], value=float(value))
        active = GaugeMetricFamily("scheduler_org_runs_active", "Active runs of an org (top orgs, then other).",
                                   labels=["org"])
        queued = GaugeMetricFamily("scheduler_org_runs_queued", "Queued runs of an org (top orgs, then other).",
                                   labels=["org"])
        for row in db.fetch_all("org_metrics", {"top": TOP_ORGS}):
            active.add_metric([row["org"]], float(row["active"]))
            queued.add_metric([row["org"]], float(row["queued"]))
        yield active
        yield queued
        yield from schedule_gauges()
        yield from task_gauges()
        yield from retention_gauges()
        yield from wait_gauges()


@api_view("GET")
def metrics(request):
    require_internal_token(request)
    registry = CollectorRegistry()
    registry.register(DatabaseGauges())
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(registry) + generate_latest(REGISTRY)
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)
