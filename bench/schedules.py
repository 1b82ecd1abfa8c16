"""Schedules (issue 33, SCD-2): 10,000 schedules due in the same minute all fire within 10 s of their slot, and a
tick over 100,000 schedules of which none is due costs one index probe. Run: ./dev bench schedules [--quick]
"""

from __future__ import annotations

import datetime as dt
import statistics
import time

import harness
import lifecycle as lifecycle_bench

LOOPS = 8


def seed(count: int, prefix: str, next_fire_at: dt.datetime) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO schedules (schedule_id, org_id, name, cron, timezone, launch_template, overlap, catch_up,
                                   paused, next_fire_at)
            SELECT %(prefix)s || i, 'org-' || (i %% 100), %(prefix)s || i, '* * * * *', 'UTC',
                   '{"playName": "bench.plays:noop"}', 'allow', 'latest', false, %(at)s
            FROM generate_series(1, %(count)s) AS i;
            ANALYZE schedules;
            """, {"prefix": prefix, "count": count, "at": next_fire_at})


def idle_tick_ms(repeats: int = 200) -> float:
    from scheduler.periodic import firing

    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        tick = firing.run_once(100)
        samples.append((time.perf_counter() - started) * 1000)
        assert not any(tick.counts.values()), tick.counts
    return statistics.median(samples)


def fire_minute(count: int) -> tuple[float, float, float]:
    """`count` schedules due at the next whole minute, fired by LOOPS loops (threads, one connection each) from
    the moment it comes: the latest fire's lag behind its slot, the median lag, and fires per second."""
    from django.db import connection
    from scheduler.periodic import firing

    slot = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    seed(count, "due-", slot)
    harness.quiesce(harness_url[0])
    time.sleep(max(0.0, (slot - dt.datetime.now(dt.UTC)).total_seconds()))

    def loop(index):
        while firing.run_once(100).again:
            pass

    elapsed = lifecycle_bench.run_workers(LOOPS, loop)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), max(extract(epoch FROM fired_at - slot_at)), "
                       "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM fired_at - slot_at)) "
                       "FROM schedule_fires WHERE slot_at = %s AND outcome = 'launched'", [slot])
        fired, latest, median = cursor.fetchone()
    assert fired == count, (fired, count)
    return float(latest), float(median), count / elapsed


harness_url = [""]


def main():
    parser = harness.arguments("1,000 due and 10,000 idle schedules instead of 10,000 and 100,000")
    args = parser.parse_args()
    due, idle = (1_000, 10_000) if args.quick else (10_000, 100_000)
    harness_url[0] = harness.recreate_database(harness.server_url())
    harness.setup_django(harness_url[0])
    seed(idle, "idle-", dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    harness.quiesce(harness_url[0])
    tick = idle_tick_ms()
    latest, median, rate = fire_minute(due)
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"an idle tick over {idle:,} schedules, none due (ms)", f"{tick:.2f}", "one index probe", f"{tick:.2f}",
             "<= 2"),
            (f"{due:,} schedules due in one minute, {LOOPS} loops: latest fire behind its slot (s)", f"{latest:.1f}",
             f"median {median:.1f} s", f"{latest:.1f}", "<= 10"),
            ("  fires per second (each launches its run)", f"{rate:.0f}", "", "", "")]
    harness.report(f"schedules benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
