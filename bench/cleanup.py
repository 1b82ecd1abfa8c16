"""Cleanup claim poll cost (issue 6): nothing pending, with 1,000,000 deleted legacy
rows, with and without the optional partial index (SCH-5), against an empty
legacy table. The preflight must stay cheap: with the index, 1M over empty at
most 2. Run: ./dev bench cleanup [--quick]
"""

from __future__ import annotations

import statistics
import time

import harness

INDEX = "runtime_scheduler_sandbox_cleanup_legacy_pending_idx"


def time_poll(repeats: int = 200) -> float:
    from scheduler.cleanup import obligations
    from scheduler.kinds import Provider, values

    obligations.claim(list(values(Provider)), "bench")
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        jobs, adopted = obligations.claim(list(values(Provider)), "bench")
        samples.append((time.perf_counter() - started) * 1000)
        assert not jobs and adopted is None
    return statistics.median(samples)


def main():
    parser = harness.arguments("100,000 legacy rows instead of 1,000,000")
    args = parser.parse_args()
    rows = 100_000 if args.quick else 1_000_000
    bench_url = harness.recreate_database(harness.server_url())
    harness.setup_django(bench_url)
    from django.db import connection

    harness.quiesce(bench_url)
    empty = time_poll()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO sandbox_cleanup_jobs (sandbox_id, run_id, attempt, environment, routing_domain, status, deleted_at) "
            "SELECT 'legacy-' || i, 'run-' || i, 1, 'production', 'org', 'deleted', now() FROM generate_series(1, %s) AS i",
            [rows],
        )
    # The million rows' WAL would otherwise be checkpointed, and their pages hinted, inside the measurement.
    harness.quiesce(bench_url)
    with_index = time_poll()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {INDEX}")
        cursor.execute("ANALYZE sandbox_cleanup_jobs")
    without_index = time_poll(repeats=20)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE INDEX {INDEX} ON sandbox_cleanup_jobs (sandbox_id) WHERE status <> 'deleted'")
    table = [("legacy table", "claim poll p50 (ms)", "reference", "ratio", "target"),
             ("empty", f"{empty:.2f}", "", "1.00", ""),
             (f"{rows:,} deleted, with {INDEX}", f"{with_index:.2f}", "the empty table", f"{with_index / empty:.2f}",
              "<= 2.00"),
             (f"{rows:,} deleted, without the index (informative)", f"{without_index:.2f}", "the empty table",
              f"{without_index / empty:.2f}", "")]
    harness.report("sandbox cleanup claim poll, nothing pending", table, args.check)


if __name__ == "__main__":
    main()
