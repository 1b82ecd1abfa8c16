"""Liveness discovery cost as history grows (issue 4): 10,000 parked runs among
10k, 100k and 1M terminal runs. Discovery reads live candidates only, through
the partial index runtime_scheduler_runs_detached_idx, so its time should stay
flat. Prints the times, the ratios and the EXPLAIN plan. Run: ./dev bench discovery [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import harness

PARKED = 10_000
HISTORY_STEPS = (10_000, 100_000, 1_000_000)


def insert_parked(count: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, play_name, status, launch_json, suspension_json, started_at)
            SELECT 'parked-' || lpad(i::text, 7, '0'), 'bench', 'waiting', '{}'::jsonb,
                   jsonb_build_object('kind', 'detached_runner', 'runnerAttempt', 1, 'startedAtMs', 0,
                       'heartbeatTimeoutMs', 60000,
                       'runtimeSandboxRef', jsonb_build_object('provider', (ARRAY['local', 'daytona', 'modal'])[1 + i %% 3],
                                                               'sandboxId', 'sb-' || i)),
                   now()
            FROM generate_series(1, %(count)s) AS i;
            INSERT INTO attempts (run_id, attempt, status, lease_token, heartbeat_at)
            SELECT 'parked-' || lpad(i::text, 7, '0'), 1, 'waiting', 'lease-' || i, now() - interval '1 hour'
            FROM generate_series(1, %(count)s) AS i;
            """,
            {"count": count},
        )


def grow_history(start: int, stop: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for low in range(start, stop, 100_000):
            high = min(stop, low + 100_000)
            cursor.execute(
                """
                INSERT INTO runs (run_id, play_name, status, launch_json, suspension_json, terminal_result_json,
                                  started_at, finished_at)
                SELECT 'done-' || lpad(i::text, 8, '0'), 'bench', 'completed', '{}'::jsonb,
                       jsonb_build_object('kind', 'detached_runner', 'runnerAttempt', 1,
                           'runtimeSandboxRef', jsonb_build_object('provider', 'daytona', 'sandboxId', 'old-' || i)),
                       '{"status": "completed"}'::jsonb, now(), now()
                FROM generate_series(%(low)s + 1, %(high)s) AS i;
                INSERT INTO attempts (run_id, attempt, status, lease_token, runner_result_json)
                SELECT 'done-' || lpad(i::text, 8, '0'), 1, 'completed', 'lease', '{"status": "completed"}'::jsonb
                FROM generate_series(%(low)s + 1, %(high)s) AS i;
                """,
                {"low": low, "high": high},
            )
        cursor.execute("VACUUM ANALYZE runs")
        cursor.execute("VACUUM ANALYZE attempts")


def time_discovery(repeats: int = 15) -> float:
    from scheduler.runs import liveness

    liveness.discover(100, 60_000)  # warm the plan and the cache
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        liveness.discover(100, 60_000)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def explain() -> str:
    import json

    from django.db import connection

    from scheduler.db import statement_sql

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement_sql("runs_list_liveness_work"),
                       {"limit": 100, "default_timeout_ms": 60_000, "after_run_ids": json.dumps({}), "now": None})
        return "\n".join("    " + row[0] for row in cursor.fetchall())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="history up to 100k only")
    args = parser.parse_args()
    harness.setup_django(harness.recreate_database(harness.server_url()))
    insert_parked(PARKED)
    steps = HISTORY_STEPS[:2] if args.quick else HISTORY_STEPS
    rows = [("terminal runs", "parked runs", "discovery p50 (ms)", "ratio to 10k", "target")]
    grown, first = 0, None
    for step in steps:
        grow_history(grown, step)
        grown = step
        took = time_discovery()
        first = first or took
        rows.append((f"{step:,}", f"{PARKED:,}", f"{took:.1f}", f"{took / first:.2f}", "<= 1.50" if step == steps[-1] else ""))
    harness.print_table("liveness discovery as history grows", rows)
    print(f"\nEXPLAIN of runs_list_liveness_work at {grown:,} terminal runs:\n{explain()}")


if __name__ == "__main__":
    main()
