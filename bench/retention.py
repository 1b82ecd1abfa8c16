"""Retention (issue 31, RET-1..3): prune 200,000 finished runs past retention (each with its facts, ledger events,
cleanup job and events, billing job and item) beside 5,000 open runs and 5,000 finished runs that still hold an
obligation. Runs pruned per second and WAL per pruned run; every kept run's rows still there (row by row); the
runner terminal's p99 at 16 clients while pruning against without; table and index sizes after pruning against a
database holding only the kept runs. Run: ./dev bench retention [--quick] [--check]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import harness
import terminal_latency

KEPT_OPEN, KEPT_HELD = 5_000, 5_000
REPETITIONS = harness.REPETITIONS
LATE_RUNS = 60_000  # what the pruner works through while the terminal is measured, seeded before each measurement
# The tables a run owns (billing items are kept on their own clock, RET-2, and left out of the size comparison).
RUN_TABLES = ("runs", "attempts", "outbox", "run_ledger_events", "sandbox_cleanup_jobs_v2", "sandbox_cleanup_events_v2",
              "compute_billing_jobs_v2")


def seed_old(cursor, count: int, prefix: str = "old-") -> None:
    """`count` runs finished 40 days ago with every obligation met (what a month of real runs leaves behind)."""
    cursor.execute("""
        INSERT INTO runs (run_id, org_id, play_name, status, launch_json, input_json, terminal_result_json,
                          created_at, updated_at, started_at, finished_at)
        SELECT %(p)s || i, 'org-' || (i %% 50), 'bench.plays:noop', 'completed', '{"sandboxProvider": "daytona"}',
               '{"order": "A-1"}', '{"status": "completed", "output": {"ok": true}}',
               now() - interval '40 days', now() - interval '40 days', now() - interval '40 days',
               now() - interval '40 days' + i * interval '1 ms'
        FROM generate_series(1, %(n)s) AS i;
        INSERT INTO attempts (run_id, attempt, status, created_at, finished_at)
        SELECT %(p)s || i, 1, 'completed', now() - interval '40 days', now() - interval '40 days'
        FROM generate_series(1, %(n)s) AS i;
        INSERT INTO outbox (event_id, run_id, event_type, payload_json, created_at, delivered_at)
        SELECT %(p)s || i || ':' || kind, %(p)s || i, kind, '{"runId": "x"}', now() - interval '40 days' + k * interval '1 ms',
               now() - interval '40 days'
        FROM generate_series(1, %(n)s) AS i,
             unnest(ARRAY['run.created', 'run.started', 'run.progress', 'run.completed']) WITH ORDINALITY AS f(kind, k);
        INSERT INTO run_ledger_events (event_id, run_id, event_type, occurred_at, payload_json)
        SELECT %(p)s || i || ':' || kind, %(p)s || i, kind, now() - interval '40 days', '{"runId": "x"}'
        FROM generate_series(1, %(n)s) AS i,
             unnest(ARRAY['run.created', 'run.started', 'run.progress', 'run.completed']) AS kind;
        INSERT INTO sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, routing_domain, status,
                                             deleted_at)
        SELECT 'daytona', 'sb-' || %(p)s || i, %(p)s || i, 1, 'production', 'org-' || (i %% 50), 'deleted',
               now() - interval '40 days'
        FROM generate_series(1, %(n)s) AS i;
        INSERT INTO sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain,
                                               event_type, details_json)
        SELECT %(p)s || i || ':' || kind, 'daytona', 'sb-' || %(p)s || i, %(p)s || i, 1, 'org-' || (i %% 50), kind,
               '{"providerOutcome": "deleted"}'
        FROM generate_series(1, %(n)s) AS i, unnest(ARRAY['provider_delete_accepted', 'provider_delete_confirmed']) AS kind;
        INSERT INTO compute_billing_jobs_v2 (run_id, status, finalized_at)
        SELECT %(p)s || i, 'finalized', now() - interval '40 days' FROM generate_series(1, %(n)s) AS i;
        INSERT INTO billing_items (adjustment_session_id, run_id, kind, provider, sandbox_id, billing_started_at,
                                   billing_ended_at, duration_ms)
        SELECT 'bill-' || %(p)s || i, %(p)s || i, 'resource', 'daytona', 'sb-' || %(p)s || i,
               now() - interval '40 days', now() - interval '40 days', 1000
        FROM generate_series(1, %(n)s) AS i;
    """, {"p": prefix, "n": count})


def seed_kept(cursor) -> None:
    """5,000 queued runs and 5,000 finished long ago whose last fact was never delivered (held)."""
    cursor.execute("""
        INSERT INTO runs (run_id, org_id, play_name, status, launch_json, created_at)
        SELECT 'open-' || i, 'org-open', 'bench.plays:noop', 'queued', '{}', now() - interval '60 days'
        FROM generate_series(1, %(open)s) AS i;
        INSERT INTO runs (run_id, org_id, play_name, status, launch_json, created_at, finished_at)
        SELECT 'held-' || i, 'org-held', 'bench.plays:noop', 'failed', '{}', now() - interval '60 days',
               now() - interval '60 days'
        FROM generate_series(1, %(held)s) AS i;
        INSERT INTO attempts (run_id, attempt, status, finished_at)
        SELECT 'held-' || i, 1, 'failed', now() - interval '60 days' FROM generate_series(1, %(held)s) AS i;
        INSERT INTO outbox (event_id, run_id, event_type, created_at, failed_at)
        SELECT 'held-' || i || ':run.failed', 'held-' || i, 'run.failed', now() - interval '60 days', now()
        FROM generate_series(1, %(held)s) AS i;
        INSERT INTO compute_billing_jobs_v2 (run_id, status, finalized_at)
        SELECT 'held-' || i, 'finalized', now() FROM generate_series(1, %(held)s) AS i;
        ANALYZE;
    """, {"open": KEPT_OPEN, "held": KEPT_HELD})


def kept_rows(cursor) -> dict[str, tuple]:
    """Every kept run with its row count in each table it owns: compared before and after, run by run."""
    counts = " + ".join(f"(SELECT count(*) FROM {table} AS t WHERE t.run_id = run.run_id)" for table in RUN_TABLES[1:])
    cursor.execute(f"SELECT run.run_id, run.status, {counts} FROM runs AS run "
                   "WHERE run.run_id LIKE 'open-%%' OR run.run_id LIKE 'held-%%' ORDER BY run.run_id")
    return {row[0]: row[1:] for row in cursor.fetchall()}


def wal_position(cursor) -> int:
    cursor.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn")
    return int(cursor.fetchone()[0])


def prune_alone(cursor, runs: int) -> tuple[float, float]:
    """Prune the first `runs` runs in this process, tick after tick: (runs/s, WAL bytes per pruned run)."""
    from scheduler.history import pruning

    wal, started, pruned = wal_position(cursor), time.perf_counter(), 0
    while pruned < runs:
        pruned += pruning.run_once(batch=min(pruning.DEFAULT_BATCH, runs - pruned)).counts["runs"]
    elapsed = time.perf_counter() - started
    return pruned / elapsed, (wal_position(cursor) - wal) / pruned


def terminal_p99_while_pruning(bench_url: str, requests: int, prefix: str, batch: int) -> float:
    from django.db import connection

    env = dict(os.environ, DATABASE_URL=bench_url, LOG_LEVEL="WARNING")
    pruner = subprocess.Popen([sys.executable, str(harness.PROJECT_DIR / "manage.py"), "prune_history",
                               "--interval", "0.1", "--batch", str(batch)], cwd=harness.PROJECT_DIR, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with connection.cursor() as cursor:  # its start-up is over and its first batches are done before the clock starts
            cursor.execute("SELECT count(*) FROM runs")
            total = cursor.fetchone()[0]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.2)
                cursor.execute("SELECT count(*) FROM runs")
                if cursor.fetchone()[0] < total - 1_000:
                    break
            else:
                raise SystemExit("the pruner pruned nothing within a minute")
        return terminal_latency.bench_http_terminal(bench_url, requests, clients=16, prefix=prefix)[1]
    finally:
        pruner.terminate()
        pruner.wait(30)


def reference_size() -> int:
    """The same kept runs in a database that never held the old ones, migrated by `manage.py migrate`."""
    import psycopg

    url = harness.recreate_database(harness.server_url(), "scheduler_bench_kept")
    env = dict(os.environ, DATABASE_URL=url)
    subprocess.run([sys.executable, str(harness.PROJECT_DIR / "manage.py"), "migrate", "-v", "0"], check=True,
                   cwd=harness.PROJECT_DIR, env=env)
    with psycopg.connect(harness.conninfo(url), autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema()}, public")
        seed_kept(psycopg.ClientCursor(conn))
    return full_sizes(url)


def full_sizes(url: str) -> int:
    """After VACUUM FULL: the bytes the live rows take (plain VACUUM leaves freed pages in place, for reuse)."""
    return table_sizes(url, "VACUUM FULL")


def plain_sizes(url: str) -> int:
    return table_sizes(url, "VACUUM")


def table_sizes(url: str, vacuum: str) -> int:
    """The run tables' bytes, indexes and TOAST included, after `vacuum` of them."""
    import psycopg

    with psycopg.connect(harness.conninfo(url), autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema()}, public")
        wait_for_older_snapshots(conn)
        conn.execute(f"{vacuum} " + ", ".join(RUN_TABLES))
        return sum(conn.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()[0] for table in RUN_TABLES)


def wait_for_older_snapshots(conn, seconds: float = 120.0) -> None:
    """Wait until no other backend of this database holds a snapshot: a vacuum keeps every row deleted after the
    oldest one (VACUUM FULL copies them), and pruning wakes autovacuum, whose ANALYZE of a table, begun while the
    last batches were deleting, is the likely reason one run's compacted tables kept about two batches' rows
    (11.5 MB where the kept runs take 7.3).
    A plain VACUUM's snapshot holds nothing back, so autovacuum's vacuums are not waited for."""
    deadline = time.monotonic() + seconds
    while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL "
                       "AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)").fetchone()[0]:
        if time.monotonic() > deadline:
            raise SystemExit("another session held a snapshot for two minutes: the sizes would count its dead rows")
        time.sleep(0.2)


def schema() -> str:
    from scheduler.conf import scheduler_settings

    return scheduler_settings.schema


def main():
    from django.db import connection

    parser = harness.arguments("40,000 old runs instead of 200,000")
    parser.add_argument("--prune-batch", type=int, default=500, help="the pruner's --batch beside the terminal")
    args = parser.parse_args()
    old = 40_000 if args.quick else 200_000
    bench_url = harness.recreate_database(harness.server_url())
    harness.setup_django(bench_url)
    with connection.cursor() as cursor:
        seed_old(cursor, old)
        seed_kept(cursor)
        before_kept = kept_rows(cursor)
    full_before = plain_sizes(bench_url)
    harness.quiesce(bench_url)
    with connection.cursor() as cursor:
        rate, wal_per_run = prune_alone(cursor, old)
        after_kept = kept_rows(cursor)
    kept_intact = before_kept == after_kept and len(after_kept) == KEPT_OPEN + KEPT_HELD
    plain_sizes(bench_url)  # the first VACUUM empties the index pages; the second recycles them (as autovacuum's rounds do)
    freed = plain_sizes(bench_url)
    with connection.cursor() as cursor:  # the next month's runs, written into the space pruning freed
        seed_old(cursor, old, prefix="next-")
    refilled = plain_sizes(bench_url)
    with connection.cursor() as cursor:
        rate_again, _ = prune_alone(cursor, old)
    compacted, reference = full_sizes(bench_url), reference_size()
    calm, busy = [], []
    for repetition in range(REPETITIONS):  # interleaved: the machine's drift lands on both sides alike
        with connection.cursor() as cursor:
            seed_old(cursor, LATE_RUNS, prefix=f"late{repetition}-")
        harness.quiesce(bench_url)
        calm.append(terminal_latency.bench_http_terminal(bench_url, 4_000, clients=16, prefix=f"calm{repetition}")[1])
        harness.quiesce(bench_url)
        busy.append(terminal_p99_while_pruning(bench_url, 4_000, f"busy{repetition}", args.prune_batch))
    calm_p99, busy_p99 = harness.median(calm), harness.median(busy)
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"{old:,} runs pruned back to back, 500 a statement (runs/s)", f"{rate:,.0f}", f"again after refilling: {rate_again:,.0f}/s",
             "", ""),
            ("  WAL per pruned run (bytes)", f"{wal_per_run:,.0f}", "", "", ""),
            (f"kept runs ({KEPT_OPEN:,} open, {KEPT_HELD:,} held) intact, row by row", "yes" if kept_intact else "NO",
             "", "1" if kept_intact else "0", ">= 1"),
            (f"terminal p99 at 16 clients while pruning at most {args.prune_batch} a statement, median of {REPETITIONS} (ms)", f"{busy_p99:.1f}",
             f"without pruning {calm_p99:.1f} ms (runs {harness.spread(busy)} / {harness.spread(calm)})", f"{busy_p99 / calm_p99:.2f}",
             "<= 1.3"),
            ("run tables after pruning and VACUUM FULL (MB)", f"{compacted / 2**20:.1f}",
             f"only the kept runs: {reference / 2**20:.1f} MB", f"{compacted / reference:.2f}", "<= 1.5"),
            (f"run tables after pruning, VACUUM and the next {old:,} runs (MB)", f"{refilled / 2**20:.1f}",
             f"before pruning {full_before / 2**20:.1f} MB (freed {freed / 2**20:.1f})",
             f"{refilled / full_before:.2f}", "<= 1.1")]
    harness.report(f"retention benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
