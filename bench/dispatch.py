"""Dispatch benchmark: starts per second and launch->parked latency against a fake Daytona over loopback HTTP.

Runs are launched at once (one statement), then `dispatch_runs` processes (the real command, its pool of
concurrent starts) drain the queue while the fake's sandbox create takes 0 ms, then 500 ms. Launch->parked is
the run's created_at to the start time its suspension records just before parking.

With 0 ms starts one dispatcher is bound by its own process, most of it the five Daytona calls a start makes.
So its rate is judged against a replay, in the same run, of just those calls: the provider's own start (create,
the read that finds it started, the runner's upload, session, exec) against the same fake from as many threads as the dispatcher starts at once, with no database.
Launched at once, launch->parked is mostly the wait in line (with N runs and S starts/s the median run waits
about N / (2 S)); the latency target is for launches offered one at a time at 80% of the measured start rate,
what a dispatcher that keeps up makes a launch wait (the LISTEN wake-up, the claim, the start and the park).
The fake keeps connections alive, as Daytona's API does.

The comparison with the replay and the paced latencies are medians of three interleaved repetitions.

Run: ./dev bench dispatch [--quick] [--check]   (by hand, never in CI)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import harness

RUNS = 2_000
# What a launch waits when the dispatcher keeps up: launches one at a time at this share of its measured rate.
# The warm-up: each of the dispatcher's 32 start threads opens its database connection, prepares its statements and
# opens its HTTP connection on its first starts (the first 80 launches here waited up to 180 ms for that).
PACED_RUNS, PACED_SHARE, PACED_WARM_UP = 1_000, 0.8, 200
ORG = "org-bench"


def seed_queued(count: int, first: int = 1, analyze: bool = True) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
            SELECT 'dispatch-' || lpad(i::text, 6, '0'), %(org)s, 'bench:play', 'queued',
                   '{"sandboxProvider": "daytona"}'::jsonb, 1, clock_timestamp()
            FROM generate_series(%(first)s, %(first)s + %(count)s - 1) AS i
            """, {"org": ORG, "count": count, "first": first})
        if analyze:
            cursor.execute("ANALYZE runs")


def seed_paced(count: int, per_second: float) -> None:
    """One launch at a time at `per_second` (a steady trickle below what a dispatcher can start)."""
    started = time.monotonic()
    for number in range(count):
        time.sleep(max(0.0, started + number / per_second - time.monotonic()))
        seed_queued(1, number + 1, analyze=False)


def unsettled() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')")
        return cursor.fetchone()[0]


def parked(skip: int = 0) -> tuple[int, list[float], float]:
    """(parked runs, launch->parked ms of each, seconds from the first launch to the last park), leaving out the
    first `skip` launches."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT (run.suspension_json ->> 'startedAtMs')::double precision
                   - extract(epoch FROM run.created_at) * 1000,
                   (run.suspension_json ->> 'startedAtMs')::double precision / 1000
                   - extract(epoch FROM min(run.created_at) OVER ())
            FROM runs AS run WHERE run.status = 'waiting' AND run.run_id > 'dispatch-' || lpad(%s::text, 6, '0')""",
            [skip])
        rows = cursor.fetchall()
    return len(rows), [row[0] for row in rows], max((row[1] for row in rows), default=0.0)


def dispatchers(bench_url: str, fake_url: str, count: int) -> list[subprocess.Popen]:
    env = dict(os.environ, DATABASE_URL=bench_url, LOG_LEVEL="WARNING", SCHEDULER_DAYTONA_API_URL=fake_url,
               SCHEDULER_DAYTONA_API_KEYS=json.dumps({ORG: "key-bench"}))
    return [subprocess.Popen([sys.executable, str(harness.PROJECT_DIR / "manage.py"), "dispatch_runs",
                              "--interval", "0.2"], cwd=harness.PROJECT_DIR, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(count)]


def listening() -> int:
    """Dispatchers up and waiting for launches (their LISTEN connection's last statement)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%run_queued%%'")
        return cursor.fetchone()[0]


def measure(bench_url: str, fake, runs: int, start_ms: int, processes: int, paced: float | None = None) -> dict:
    fake.create_gate = (lambda: time.sleep(start_ms / 1000)) if start_ms else None
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE runs CASCADE")
    workers = dispatchers(bench_url, fake.url, processes)
    deadline = time.monotonic() + 600
    while listening() < processes and time.monotonic() < deadline:
        time.sleep(0.1)  # launch once every dispatcher waits: its start-up is not dispatch latency
    if paced:
        # The dispatcher's first starts open its threads' connections and clients: warm-up, not latency.
        seed_paced(runs + PACED_WARM_UP, paced)
    else:
        seed_queued(runs)
    try:
        while unsettled() and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(60)
    count, latencies, span = parked(PACED_WARM_UP if paced else 0)
    assert count == runs, f"only {count} of {runs} runs parked"
    return {"p50": harness.percentile(latencies, 0.5), "p99": harness.percentile(latencies, 0.99),
            "rate": runs / span if span else float("inf")}


def replay(fake_url: str, starts: int, threads: int) -> float:
    """Starts per second of the provider's own start (its five HTTP calls) from `threads` threads of a process of
    their own (as the dispatcher is: the fake answers from this one), no database."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_replay_process, args=(fake_url, starts, threads, sender))
    child.start()
    rate = receiver.recv()
    child.join()
    assert child.exitcode == 0, f"the replay process failed ({child.exitcode})"
    return rate


def _replay_process(fake_url: str, starts: int, threads: int, pipe) -> None:
    from lifecycle import run_workers

    from scheduler import outbound
    from scheduler.providers.base import StartRequest
    from scheduler.providers.daytona import DaytonaProvider

    provider = DaytonaProvider(fake_url, {ORG: "key-bench"})
    # An environment of the size the dispatcher sends (run and attempt, a runner token, the API's address).
    env = {"SCHEDULER_RUN_ID": "dispatch-000001", "SCHEDULER_ATTEMPT": "1", "SCHEDULER_RUNNER_TOKEN": "t" * 180,
           "SCHEDULER_API_URL": "http://127.0.0.1:8000", "SCHEDULER_HEARTBEAT_MS": "10000"}

    def starter(index):
        try:
            for number in range(index, starts, threads):
                provider.start(StartRequest(f"replay-{number}", 1, ORG, env, ["python3", "-m", "scheduler.sandbox.runner"]))
        finally:
            outbound.close_thread_transports()

    pipe.send(starts / run_workers(threads, starter))
    pipe.close()


def main():
    parser = harness.arguments("a fifth of the runs, for a smoke run")
    args = parser.parse_args()
    runs = RUNS // 5 if args.quick else RUNS
    bench_url = harness.recreate_database(harness.server_url())
    harness.setup_django(bench_url)
    from tests.providers.fake_daytona import FakeDaytona

    from scheduler.conf import scheduler_settings

    threads = scheduler_settings.dispatch_starts
    with FakeDaytona({"key-bench": ORG}, keep_alive=True) as fake:
        # Medians of interleaved repetitions (ours, replay, ours, ...): identical runs here differ by 5-10%.
        instants: list[dict] = []
        rates = harness.interleaved({
            "ours": lambda rep: instants.append(measure(bench_url, fake, runs, 0, 1)) or instants[-1]["rate"],
            "replay": lambda rep: replay(fake.url, runs, threads)})
        instant = instants[sorted(range(len(instants)), key=lambda i: instants[i]["rate"])[len(instants) // 2]]
        offered = harness.median(rates["ours"]) * PACED_SHARE
        paced = [measure(bench_url, fake, PACED_RUNS // (5 if args.quick else 1), 0, 1, paced=offered)
                 for _ in range(harness.REPETITIONS)]
        one = measure(bench_url, fake, runs, 500, 1)
        two = measure(bench_url, fake, runs, 500, 2)
    ours, replayed = harness.median(rates["ours"]), harness.median(rates["replay"])
    p50s, p99s = [run["p50"] for run in paced], [run["p99"] for run in paced]
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"{runs} launched at once, 0 ms starts, 1 dispatcher (starts/s)", f"{ours:.0f}",
             f"its 5 HTTP calls replayed from {threads} threads, no database: {replayed:.0f} starts/s "
             f"(medians of {len(rates['ours'])}; ours {harness.spread(rates['ours'])}, "
             f"replay {harness.spread(rates['replay'])})", f"{ours / replayed:.2f}", ">= 0.60"),
            ("  launch->parked of those, mostly the wait in line (ms)", f"{instant['p50']:.0f}",
             f"p99 {instant['p99']:.0f} ms", "", ""),
            (f"  launched one at a time at {PACED_SHARE:.0%} of that ({offered:.0f}/s): launch->parked p50 (ms)",
             f"{harness.median(p50s):.1f}", f"median of {len(paced)}, {harness.spread(p50s, 1)} ms; "
             f"{harness.median([run['rate'] for run in paced]):.0f} parked/s", f"{harness.median(p50s):.1f}", "<= 20"),
            ("    the same: p99 (ms)", f"{harness.median(p99s):.1f}", f"median of {len(paced)}, {harness.spread(p99s, 1)} ms",
             f"{harness.median(p99s):.1f}", "<= 100"),
            ("  500 ms starts, 1 dispatcher (starts/s)", f"{one['rate']:.0f}",
             f"p50 {one['p50']:.0f} ms, p99 {one['p99']:.0f} ms", f"{one['rate']:.1f}", ">= 50"),
            ("  500 ms starts, 2 dispatchers (starts/s)", f"{two['rate']:.0f}", "1 dispatcher",
             f"{two['rate'] / one['rate']:.2f}", ">= 1.80")]
    harness.report(f"dispatch benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
