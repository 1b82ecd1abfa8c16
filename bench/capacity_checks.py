"""After the chaos soak (issue 32): the four promises, checked by queries against what the fakes saw."""

from __future__ import annotations

import time

TERMINAL_FACTS = ("run.completed", "run.failed", "run.cancelled")


# The runs not ended, by status: a report that did not settle says where they stuck (queued: dispatch; waiting:
# their runners' reports; running: a start not yet parked). Then each other thing outstanding, as one count.
RUNS_NOT_ENDED = ("SELECT 'runs not ended (' || status || ')', count(*) FROM runs "
                  "WHERE status NOT IN ('completed', 'failed', 'cancelled') GROUP BY status ORDER BY status")
OUTSTANDING = {
    "facts not delivered": "SELECT count(*) FROM outbox WHERE delivered_at IS NULL",
    "cleanup jobs not deleted": "SELECT count(*) FROM sandbox_cleanup_jobs_v2 WHERE status <> 'deleted'",
    "billing jobs not finalized": "SELECT count(*) FROM compute_billing_jobs_v2 WHERE status <> 'finalized'",
    "attempts never parked, not reconciled": "SELECT count(*) FROM control WHERE key LIKE 'sandbox_unreconciled:%%'",
}


def settled(deadline_s: float = 180.0) -> dict[str, int]:
    """Wait until every run ended, every fact was delivered, every sandbox's cleanup and every billing job
    finished (an empty answer); what is still outstanding when the deadline passes."""
    from django.db import connection

    deadline = time.monotonic() + deadline_s
    while True:
        with connection.cursor() as cursor:
            cursor.execute(RUNS_NOT_ENDED)
            outstanding = dict(cursor.fetchall())
            for what, sql in OUTSTANDING.items():
                cursor.execute(sql)
                outstanding[what] = cursor.fetchone()[0]
        outstanding = {what: count for what, count in outstanding.items() if count}
        if not outstanding or time.monotonic() > deadline:
            return outstanding
        time.sleep(1)


def promises(sightings: list[tuple[str, str]], sandboxes: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Counts that must all be 0: facts never delivered or never seen by the ledger, runs whose facts the ledger
    first saw out of order, attempts with more than one verdict, sandboxes not deleted or deleted twice, runs not
    billed exactly once."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT run_id, event_id, delivered_at IS NOT NULL FROM outbox WHERE lane = 'ledger' "
                       "ORDER BY run_id, created_at, event_id")
        facts = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM (SELECT run_id FROM outbox WHERE event_type = ANY (%s) "
                       "GROUP BY run_id, payload_json ->> 'attempt' HAVING count(*) > 1) AS twice",
                       [list(TERMINAL_FACTS)])
        double_verdicts = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM (SELECT sandbox_id FROM sandbox_cleanup_jobs_v2 WHERE status = 'deleted' "
                       "GROUP BY provider, sandbox_id HAVING count(*) > 1) AS twice")
        deleted_twice = cursor.fetchone()[0]
        # Counted per run in one pass each and joined (hash joins): a lookup per run of billing_items, which no
        # index leads by run, was quadratic and passed the statement timeout after a full soak (40,000 runs).
        cursor.execute("""
            SELECT count(*) FROM runs AS run
            LEFT JOIN (SELECT run_id, count(*) AS finalized FROM compute_billing_jobs_v2 WHERE status = 'finalized'
                       GROUP BY run_id) AS bill USING (run_id)
            LEFT JOIN (SELECT run_id, count(*) AS items FROM billing_items GROUP BY run_id) AS item USING (run_id)
            WHERE jsonb_array_length(run.runtime_resources_json) > 0
              AND (coalesce(bill.finalized, 0) <> 1
                   OR coalesce(item.items, 0) <> jsonb_array_length(run.runtime_resources_json))""")
        not_billed_once = cursor.fetchone()[0]
    first_seen: dict[str, list[str]] = {}
    seen_ids = set()
    for run_id, event_id in sightings:
        if event_id not in seen_ids:
            seen_ids.add(event_id)
            first_seen.setdefault(run_id, []).append(event_id)
    expected: dict[str, list[str]] = {}
    lost = 0
    for run_id, event_id, delivered in facts:
        expected.setdefault(run_id, []).append(event_id)
        lost += (not delivered) or event_id not in seen_ids
    out_of_order = sum(1 for run_id, order in expected.items() if first_seen.get(run_id, []) != order)
    left = {sandbox_id: run_id for sandbox_id, (state, run_id) in sandboxes.items()
            if state not in ("destroying", "destroyed")}
    not_deleted = len(left)
    for sandbox_id, run_id in list(left.items())[:5]:
        print(f"  not deleted: sandbox {sandbox_id} of run {run_id}: {_story(run_id, sandbox_id)}")
    return {"facts lost": lost, "runs with facts out of order": out_of_order, "double verdicts": double_verdicts,
            "sandboxes not deleted": not_deleted, "sandboxes deleted twice": deleted_twice,
            "runs not billed exactly once": not_billed_once}


def _story(run_id: str, sandbox_id: str) -> str:
    """What the database knows of a run whose sandbox was left (for the report)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT status, suspension_json ->> 'runtimeSandboxRef' FROM runs WHERE run_id = %s", [run_id])
        run = cursor.fetchone()
        cursor.execute("SELECT attempt, status, runner_result_json ->> 'verdict' FROM attempts WHERE run_id = %s",
                       [run_id])
        attempts = cursor.fetchall()
        cursor.execute("SELECT sandbox_id, status FROM sandbox_cleanup_jobs_v2 WHERE run_id = %s", [run_id])
        jobs = cursor.fetchall()
        cursor.execute("SELECT key FROM control WHERE key LIKE %s", [f"%{run_id}%"])
        keys = cursor.fetchall()
    return f"run {run}, attempts {attempts}, cleanup jobs {jobs}, control {keys}"
