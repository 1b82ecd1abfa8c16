"""Liveness discovery cost: proportional to what is stale, not to what is parked or finished.

An idle tick over 100,000 parked runs (none overdue), a tick over 10,000 parked of which 300 are overdue, and
the latter as terminal history grows to 10k, 100k and 1M runs. Parked rows carry the liveness deadline their
park and heartbeat statements keep. Prints the table with its targets and the EXPLAIN plan.

Run: ./dev bench discovery [--quick] [--check]   (by hand, never in CI)
"""

from __future__ import annotations

import statistics
import time

import harness

PARKED = 10_000
IDLE_PARKED = 100_000
STALE = 300
HISTORY_STEPS = (10_000, 100_000, 1_000_000)


def insert_parked(count: int, stale: int = 0) -> None:
    """`count` parked runs instead of any there were (terminal history stays); the first `stale` last heard from
    an hour ago, the rest just now (60 s timeouts)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM attempts WHERE run_id LIKE 'parked-%%'")
        cursor.execute("DELETE FROM runs WHERE run_id LIKE 'parked-%%'")
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
            INSERT INTO attempts (run_id, attempt, status, lease_token, heartbeat_at, liveness_deadline)
            SELECT 'parked-' || lpad(i::text, 7, '0'), 1, 'waiting', 'lease-' || i, beat.at, beat.at + interval '60 s'
            FROM generate_series(1, %(count)s) AS i
            CROSS JOIN LATERAL (SELECT CASE WHEN i <= %(stale)s THEN now() - interval '1 hour' ELSE now() END AS at) AS beat;
            """,
            {"count": count, "stale": stale},
        )
        cursor.execute("ANALYZE runs")
        cursor.execute("ANALYZE attempts")


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


def time_discovery(repeats: int = 15, expect: int | None = None) -> float:
    """Median ms of one discovery tick's read (a tick pages 100 per provider: 300 overdue fill three pages)."""
    from scheduler.runs import liveness

    found = liveness.discover(100, 60_000)  # warm the plan and the cache
    assert expect is None or len(found) == expect, f"discovery found {len(found)}, expected {expect}"
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        liveness.discover(100, 60_000)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


OLD_CANCELS = 10_000


def time_sweep_tick(cancels: int, repeats: int = 15) -> float:
    """Median ms of a whole liveness sweep tick with nothing to do, beside `cancels` cancel keys of ended runs
    (the keys stay for ever); the ticks before the clock mark those keys, and a vacuum then drops their old
    index entries, as autovacuum would."""
    from django.db import connection

    from scheduler.runs import liveness

    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO control (key, created_at) SELECT 'runtime_cancel:done-' || lpad(i::text, 8, '0'), "
                       "now() - interval '1 day' FROM generate_series(1, %s) AS i", [cancels])
    for _ in range(cancels // 1000 + 1):
        liveness.run_once()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE control")
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        liveness.run_once()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def explain() -> str:
    """The plan discovery runs: its generic plan (the block is marked `plan: generic`), executed."""
    import json

    from tests.support import generic_plan

    plan = generic_plan("runs_list_liveness_work", {
        "limit": 100, "default_timeout_ms": 60_000, "after_run_ids": json.dumps({}), "now": None,
        "providers": ["daytona", "modal", "local"], "fallback_provider": "daytona"}, analyze=True)
    return "\n".join("    " + line for line in plan.splitlines())


def main():
    parser = harness.arguments("history up to 100k only")
    args = parser.parse_args()
    harness.setup_django(harness.recreate_database(harness.server_url()))
    rows = [("measure", "value", "reference", "ratio", "target")]
    insert_parked(IDLE_PARKED)
    idle = time_discovery(expect=0)
    rows.append((f"idle tick, {IDLE_PARKED:,} parked, none overdue (ms)", f"{idle:.2f}", "", f"{idle:.2f}", "<= 2"))
    insert_parked(PARKED, STALE)
    busy = time_discovery(expect=STALE)
    rows.append((f"tick, {PARKED:,} parked, {STALE} overdue (ms)", f"{busy:.2f}", "", f"{busy:.2f}", "<= 10"))
    steps = HISTORY_STEPS[:2] if args.quick else HISTORY_STEPS
    grown, first = 0, None
    for step in steps:
        grow_history(grown, step)
        grown = step
        took = time_discovery(expect=STALE)
        first = first or took
        rows.append((f"  the same among {step:,} terminal runs (ms)", f"{took:.2f}", "the first step",
                     f"{took / first:.2f}", "<= 1.50" if step == steps[-1] else ""))
    # Again beside the history: the plan PostgreSQL picks depends on the statistics, and with history it once
    # walked every parked attempt (12 ms) although the empty database's idle tick above took 0.3 ms.
    insert_parked(IDLE_PARKED)
    idle_beside = time_discovery(expect=0)
    rows.append((f"idle tick, {IDLE_PARKED:,} parked, none overdue, among {grown:,} terminal runs (ms)",
                 f"{idle_beside:.2f}", "", f"{idle_beside:.2f}", "<= 2"))
    sweep = time_sweep_tick(OLD_CANCELS)
    rows.append((f"  the whole sweep tick (every statement), {OLD_CANCELS:,} cancels of ended runs beside (ms)",
                 f"{sweep:.2f}", "", "", ""))
    harness.report("liveness discovery", rows, args.check)
    print(f"\nEXPLAIN of runs_list_liveness_work (its generic plan) at {grown:,} terminal runs:\n{explain()}")


if __name__ == "__main__":
    main()
