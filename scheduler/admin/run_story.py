"""A run's page tells its whole story in order: attempts, receipts, waits and events, facts and their delivery, cleanup,
billing, ledger events.

Each part is a small read-only table whose rows link to their own admin pages.
"""

from __future__ import annotations

import json

from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from scheduler import db, models
from scheduler.redaction import redact


def _link(model: str, key: str, text: str):
    return format_html('<a href="{}">{}</a>', reverse(f"admin:scheduler_{model}_change", args=[quote(key)]), text)


def _table(headers: list[str], rows: list[tuple]):
    if not rows:
        return "-"
    head = format_html_join("", "<th>{}</th>", ((header,) for header in headers))
    body = format_html_join("", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((cell,) for cell in row)),)
                                                for row in rows))
    return format_html('<table class="run-story"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>', head, body)


def _age(moment) -> str:
    return "-" if moment is None else f"{(timezone.now() - moment).total_seconds():.0f} s ago"


def _short(value, limit: int = 300) -> str:
    text = json.dumps(redact(value), sort_keys=True, default=str) if value is not None else "-"
    return text if len(text) <= limit else text[:limit] + "..."


def attempts(run: models.Run):
    rows = []
    for row in models.AttemptRow.objects.filter(run_id=run.run_id).order_by("attempt"):
        result = row.runner_result_json or {}
        verdict = result.get("verdict") or (result.get("error") or {}).get("code") or result.get("status") or "-"
        rows.append((_link("attemptrow", row.admin_key, str(row.attempt)), row.status, _age(row.heartbeat_at),
                     verdict, _short(result.get("output", result.get("error"))),
                     format_html("<pre>{}</pre>", result["logTail"][-2000:]) if result.get("logTail") else "-"))
    return _table(["attempt", "status", "heartbeat", "verdict", "result", "runner log (tail)"], rows)


def run_link(run_id: str):
    return _link("run", run_id, run_id)


def lease_left(status: str, expires_at) -> str:
    """How long a running receipt's lease still holds (or how long ago it lapsed)."""
    if status != "running" or expires_at is None:
        return "-"
    seconds = (expires_at - timezone.now()).total_seconds()
    return f"{seconds:.0f} s left" if seconds >= 0 else f"lapsed {-seconds:.0f} s ago"


def receipts(run: models.Run):
    rows = []
    for row in models.ReceiptRow.objects.filter(run_id=run.run_id).order_by("created_at", "key"):
        rows.append((_link("receiptrow", row.admin_key, row.key), row.status, row.run_attempt or "-",
                     lease_left(row.status, row.lease_expires_at), _age(row.updated_at),
                     _short(row.output_json if row.status == "completed" else row.error_json)))
    return _table(["step", "status", "attempt", "lease", "updated", "output or error"], rows)


def facts(run: models.Run):
    rows = []
    for fact in models.OutboxFact.objects.filter(run_id=run.run_id).order_by("created_at", "event_id"):
        state = ("delivered" if fact.delivered_at else "failed head" if fact.failed_at
                 else "retrying" if fact.next_attempt_at else "undelivered")
        rows.append((_link("outboxfact", fact.event_id, fact.event_type), fact.created_at, state, fact.attempt_count,
                     (fact.last_error or "-")[:200]))
    return _table(["fact", "created", "delivery", "attempts", "last error"], rows)


def cleanup(run: models.Run):
    rows = [(_link("cleanupjobrow", job.admin_key, f"{job.provider} {job.sandbox_id}"), job.attempt, job.status,
             job.block_reason or job.last_error or "-", job.deleted_at or "-")
            for job in models.CleanupJobRow.objects.filter(run_id=run.run_id).order_by("attempt", "sandbox_id")]
    events = [(event.created_at, event.event_type, f"{event.provider} {event.sandbox_id}", _short(event.details_json, 120))
              for event in models.CleanupEvent.objects.filter(run_id=run.run_id).order_by("created_at")]
    return format_html("{}{}", _table(["sandbox", "attempt", "status", "why", "deleted"], rows),
                       _table(["at", "event", "sandbox", "details"], events))


def billing(run: models.Run):
    rows = [(item.adjustment_session_id, item.kind, f"{item.provider} {item.sandbox_id}", item.billing_started_at,
             item.billing_ended_at, f"{item.duration_ms / 1000:.1f} s")
            for item in models.BillingItem.objects.filter(run_id=run.run_id).order_by("billing_started_at")]
    return _table(["adjustment", "kind", "sandbox", "from", "to", "billed"], rows)


def ledger(run: models.Run):
    rows = [(event.event_id, event.event_type, event.occurred_at, event.received_at)
            for event in models.RunLedgerEvent.objects.filter(run_id=run.run_id).order_by("occurred_at", "event_id")]
    return _table(["event", "type", "occurred", "received"], rows)


def waits(run: models.Run):
    """WAIT-7: the play's durable waits and the events sent to the run, in the order they happened."""
    rows = []
    for row in db.fetch_all("waits_list_for_run", {"run_id": run.run_id}):
        if row["entry"] == "wait":
            if row["detail"] == "event":
                what = f"event {row['event']}" + (f", timing out at {row['deadline']}" if row["deadline"] else "")
            else:
                what = f"the time {row['deadline']}"
            rows.append((f"wait {row['name']}", what, row["at"],
                         row["done_at"] or "waiting", f"attempt {row['attempt']}"))
        else:
            rows.append((f"event {row['detail']}", f"id {row['name']}", row["at"],
                         f"consumed by {row['event']}" if row["event"] else "kept for a wait", "-"))
    return _table(["entry", "what", "at", "done", "by"], rows)
