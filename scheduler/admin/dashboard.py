"""The admin index as a dashboard: what is queued, stuck, failed and waiting to be delivered, cleaned or billed.

Every figure is one index-bounded statement (sql/dashboard.sql) and links to
the filtered list that explains it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse

from scheduler import db, replica
from scheduler.conf import scheduler_settings
from scheduler.fairshare import limits
from scheduler.history import pruning
from scheduler.kinds import HeldReason


@dataclass(frozen=True)
class Figure:
    label: str
    value: object
    link: str
    alarming: bool = False


def _list(model: str, query: str) -> str:
    return f"{reverse(f'admin:scheduler_{model}_changelist')}?{query}"


def _org_figures() -> list[Figure]:
    """FSH-10: paused orgs, and orgs with runs queued behind their cap or start rate (queued runs as the value)."""
    shown = []
    for org in limits.held():
        if org["paused"]:
            why = "paused"
        elif org["max_active"] is not None and org["active"] >= org["max_active"]:
            why = f"at its cap of {org['max_active']}"
        elif org["queued"] and org["max_starts_per_minute"] is not None:
            why = f"limited to {org['max_starts_per_minute']} starts a minute"
        else:
            continue
        link = reverse("admin:scheduler_orglimit_change", args=[quote(org["org_id"])])
        shown.append(Figure(f"{org['org_id']}: {why}, {org['active']} active; queued", org["queued"], link,
                            org["paused"] and org["queued"] > 0))
    return shown


def _wait_figures() -> list[Figure]:
    """WAIT-7: runs waiting durably (sandbox released) by kind; overdue timers are alarming (no timer loop runs)."""
    rows = {row["kind"]: row for row in db.fetch_all("waits_metrics")}
    labels = {"event": "waiting durably for an event", "timer": "waiting durably for a time"}
    return [Figure(labels[kind], rows[kind]["runs"] if kind in rows else 0, _list("run", f"waiting_for={kind}"),
                   kind in rows and rows[kind]["overdue"] > 0) for kind in labels]


def figures() -> dict[str, list[Figure]]:
    runs = db.fetch_one("dashboard_runs", {"default_timeout_ms": scheduler_settings.heartbeat_timeout_ms})
    backlog = db.fetch_one("dashboard_backlogs")
    oldest = backlog["oldest_undelivered_seconds"]
    waits = _wait_figures()
    return {
        "Runs": [
            Figure("queued", runs["queued"], _list("run", "status__exact=queued")),
            Figure("dispatching (claimed, not parked)", runs["dispatching"], _list("run", "status__exact=running")),
            Figure("waiting on a runner", runs["waiting"] - sum(figure.value for figure in waits),
                   _list("run", "status__exact=waiting")),
            *waits,
            Figure("stuck runners (heartbeat past its timeout)", runs["stuck_runners"], _list("run", "stuck=runner"),
                   runs["stuck_runners"] > 0),
            Figure("stuck claims (lease expired before park)", runs["stuck_claims"], _list("run", "stuck=claim"),
                   runs["stuck_claims"] > 0),
        ],
        "Failed in the last 24 hours": [
            Figure(row["code"], row["runs"], _list("run", f"status__exact=failed&error_code={row['code']}"), True)
            for row in db.fetch_all("dashboard_failures")
        ],
        "Run ledger delivery": [
            Figure("undelivered facts", backlog["undelivered"], _list("outboxfact", "delivery=undelivered")),
            Figure("oldest undelivered (seconds)", round(oldest, 1) if oldest is not None else "-",
                   _list("outboxfact", "delivery=undelivered")),
            Figure("failed heads (blocking their run)", backlog["failed_heads"], _list("outboxfact", "delivery=failed"),
                   backlog["failed_heads"] > 0),
            Figure("retrying", backlog["retrying"], _list("outboxfact", "delivery=retrying")),
        ],
        "Orgs paused or throttled": _org_figures(),
        "Sandbox cleanup and billing": [
            Figure("cleanup pending", backlog["cleanup_pending"], _list("cleanupjobrow", "status__exact=pending")),
            Figure("oldest pending cleanup", backlog["cleanup_oldest_pending"] or "-",
                   _list("cleanupjobrow", "status__exact=pending")),
            Figure("cleanup blocked", backlog["cleanup_blocked"], _list("cleanupjobrow", "status__exact=blocked"),
                   backlog["cleanup_blocked"] > 0),
            Figure("billing pending", backlog["billing_pending"], _list("billingjob", "status__exact=pending")),
        ],
        f"Held past retention ({scheduler_settings.retention_days} days)": _held_figures(),
    }


def _reads() -> dict[str, list[Figure]]:
    """RET-5: where the dashboard and the lists read from, and how far behind that is."""
    if not replica.configured():
        return {}
    link = reverse("admin:index")
    if replica.read_alias() != replica.REPLICA_ALIAS:
        return {"Reads": [Figure("replica unreachable: reading the primary", "-", link, True)]}
    lag = db.fetch_value("replica_lag")
    return {"Reads": [Figure("replica lag (seconds)", "-" if lag is None else round(lag, 1), link, (lag or 0) > 30)]}


HELD_LABELS = {
    HeldReason.UNDELIVERED_FACTS: "finished runs with facts not delivered",
    HeldReason.CLEANUP_PENDING: "finished runs with a sandbox not confirmed deleted",
    HeldReason.BILLING_UNFINALIZED: "finished runs with billing not finalized",
}


def _held_figures() -> list[Figure]:
    """RET-1: why the database still holds runs pruning would otherwise remove; each links to those runs."""
    return [Figure(HELD_LABELS[reason], count, _list("run", f"held={reason.value}"), count > 0)
            for reason, count in pruning.held().items()]


def install(site: admin.AdminSite) -> None:
    """The site's index shows the dashboard above Django's list of models."""
    plain_index = site.index

    def index(request, extra_context=None):
        with replica.replica_reads():  # RET-5: the dashboard's figures may lag the primary by the replica's lag
            return plain_index(request, {**(extra_context or {}), "dashboard": {**figures(), **_reads()}})

    site.index = index
    site.index_template = "admin/scheduler_dashboard.html"
