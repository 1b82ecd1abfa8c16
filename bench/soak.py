"""Steady-state soak: launch at a fixed offered rate, dispatch through an instant fake Daytona, settle as the
runners would, drain to the built-in receiver, continuously; per 10-second window print the completed rate,
the delivery lag and the dead tuples of runs and outbox.

Targets: the completed rate of the last minute is at least 0.9 of the first minute's, and dead tuples stay
bounded (the last minute's peak at most twice the first minute's, or under 20,000).

With --find-max (capacity.py): whole runs (launch, dispatch, three heartbeats, settle, delivery to an external
receiver, cleanup, billing) offered at a rising rate until fewer than 95% of them complete or the delivery lag's
p99 passes 1 s, then two halvings between the last rate sustained and that one; the highest rate sustained,
the server time per run at it and where the time and the CPU went;
then each stage's p99 at 25% of it, this tree's workers against the release before issue 47's (stage_latency.py);
then 80% of it held for 3 minutes (--quick: 1) while a random worker is SIGKILLed every 10 s and PostgreSQL is
crashed and restarted once, and the four promises checked by queries at the end.

Run: ./dev bench soak [--quick] [--check] [--rate N] [--minutes M] [--find-max]   (by hand, never in CI)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import capacity
import harness

ORG = "org-soak"
WINDOW = 10.0


def workers(bench_url: str, fake_url: str) -> list[subprocess.Popen]:
    env = dict(os.environ, DATABASE_URL=bench_url, LOG_LEVEL="WARNING", SCHEDULER_DAYTONA_API_URL=fake_url,
               SCHEDULER_DAYTONA_API_KEYS=json.dumps({ORG: "key-soak"}))
    commands = [["dispatch_runs", "--interval", "0.5"], ["drain_outbox", "--interval", "0.5"]]
    return [subprocess.Popen([sys.executable, str(harness.PROJECT_DIR / "manage.py"), *command],
                             cwd=harness.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for command in commands]


def launch_at(rate: float, stop: threading.Event) -> None:
    """The offered load: `rate` launches a second, paced, whatever the rest does."""
    from django.db import connections

    from scheduler.runs import lifecycle

    request = lifecycle.LaunchRequest(play_name="soak:play", org_id=ORG, launch={"sandboxProvider": "daytona"},
                                      max_attempts=1)
    started, launched = time.monotonic(), 0
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while launched < due:
            lifecycle.launch_run(request).run_id
            launched += 1
        stop.wait(0.02)
    connections.close_all()


def settle_parked(stop: threading.Event) -> None:
    """Each parked run's runner reports completed at once (the fake sandbox runs nothing)."""
    from django.db import connection, connections

    from scheduler.runs import settlement

    result = {"status": "completed", "output": {"ok": True},
              "stats": {"runtimeResources": {"cpuMs": 1, "wallMs": 1, "peakMemoryBytes": 1}}}
    while not stop.is_set():
        with connection.cursor() as cursor:
            cursor.execute("SELECT run_id, attempt, lease_token FROM attempts WHERE status = 'waiting' LIMIT 64")
            parked = cursor.fetchall()
        if parked:
            settlement.settle_attempts([settlement.Settlement(run_id, attempt, lease, result, from_runner=True)
                                        for run_id, attempt, lease in parked])
        else:
            stop.wait(0.05)
    connections.close_all()


def sample(since: float) -> dict:
    from django.db import connection

    seen = capacity.window(since)
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname IN ('runs', 'outbox')")
        dead = dict(cursor.fetchall())
    return {"completed": seen["finished"], "lag_ms": seen["lag_s"] * 1000, "dead_runs": dead.get("runs", 0),
            "dead_outbox": dead.get("outbox", 0)}


def main():
    parser = harness.arguments("2 minutes instead of 3")
    parser.add_argument("--rate", type=float, default=40.0, help="launches per second (default 40)")
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--find-max", action="store_true", help="the highest sustained rate, then held under chaos")
    args = parser.parse_args()
    if args.find_max:
        import capacity_soak

        return capacity_soak.main(args)
    minutes = args.minutes or (2.0 if args.quick else 3.0)
    bench_url = harness.recreate_database(harness.server_url())
    harness.setup_django(bench_url)
    from tests.providers.fake_daytona import FakeDaytona

    windows = []
    with FakeDaytona({"key-soak": ORG}, keep_alive=True) as fake:  # as Daytona: pooled clients reuse connections
        processes = workers(bench_url, fake.url)
        stop = threading.Event()
        threads = [threading.Thread(target=launch_at, args=(args.rate, stop)),
                   threading.Thread(target=settle_parked, args=(stop,))]
        try:
            time.sleep(3)  # the workers start and LISTEN
            for thread in threads:
                thread.start()
            end = time.monotonic() + minutes * 60
            while time.monotonic() < end:
                since = time.time()
                time.sleep(WINDOW)
                window = sample(since)
                windows.append(window)
                print(f"  window {len(windows):3d}: {window['completed'] / WINDOW:6.1f} runs/s completed, "
                      f"lag p99 {window['lag_ms']:6.0f} ms, dead tuples runs {window['dead_runs']:6d} "
                      f"outbox {window['dead_outbox']:6d}", flush=True)
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(60)
    per_minute = max(1, int(60 / WINDOW))
    first, last = windows[:per_minute], windows[-per_minute:]
    first_rate = sum(w["completed"] for w in first) / (len(first) * WINDOW)
    last_rate = sum(w["completed"] for w in last) / (len(last) * WINDOW)
    first_dead = max(w["dead_runs"] + w["dead_outbox"] for w in first)
    last_dead = max(w["dead_runs"] + w["dead_outbox"] for w in last)
    bounded = last_dead <= max(2 * first_dead, 20_000)
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"completed runs/s, last minute (offered {args.rate:.0f}/s)", f"{last_rate:.1f}",
             f"first minute {first_rate:.1f}", f"{last_rate / first_rate if first_rate else 0:.2f}", ">= 0.90"),
            ("dead tuples (runs + outbox), last minute's peak", f"{last_dead}", f"first minute {first_dead}",
             "1" if bounded else "0", ">= 1")]
    harness.report(f"soak ({minutes:g} min)", rows, args.check,
                   series={"completed_per_second": [w["completed"] / WINDOW for w in windows],
                           "lag_p99_ms": [w["lag_ms"] for w in windows], "window_seconds": WINDOW})


if __name__ == "__main__":
    main()
