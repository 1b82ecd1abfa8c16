"""GET /metrics: scheduler gauges in the Prometheus text format (internal bearer token)."""

from django.http import HttpResponse

from scheduler import db
from scheduler.api.auth import require_internal_token
from scheduler.api.http import api_view

HELP = {
    "outbox_undelivered": "Outbox facts not yet delivered.",
    "outbox_failed_heads": "Failed heads blocking their run's lane until requeued.",
    "outbox_retrying": "Undelivered facts that failed at least once and will be retried.",
    "outbox_oldest_undelivered_seconds": "Age of the oldest undelivered outbox fact.",
    "runs_queued": "Runs waiting to be claimed.",
    "runs_active": "Runs running or waiting on a detached runner.",
    "cleanup_pending": "Sandbox cleanup obligations still to delete.",
    "cleanup_blocked": "Sandbox cleanup obligations blocked until an operator unblocks them.",
    "billing_pending": "Compute billing jobs not yet finalized.",
}


@api_view("GET")
def metrics(request):
    require_internal_token(request)
    row = db.fetch_one("scheduler_metrics")
    lines = []
    for name, value in row.items():
        lines += [f"# HELP scheduler_{name} {HELP[name]}", f"# TYPE scheduler_{name} gauge", f"scheduler_{name} {float(value)}"]
    return HttpResponse("\n".join(lines) + "\n", content_type="text/plain; version=0.0.4")
