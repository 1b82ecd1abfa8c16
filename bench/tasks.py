"""Django's task backend (issue 34, TSK-1): how fast `enqueue` launches runs, against pgbench running the launch
statement itself on the same server in the same run, and how long a task takes from enqueue to finished with
instant local sandboxes (the API under gunicorn and a dispatcher, as `./dev up` runs them).
Run: ./dev bench tasks [--quick] [--check]
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time

import harness
import lifecycle as lifecycle_bench
import terminal_latency

THREADS = 8
LATER = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)


def enqueue_rate(count: int) -> float:
    """Tasks enqueued per second by THREADS threads, each with its own connection, started behind a barrier."""
    from scheduler.stack.demo_tasks import greet

    share = count // THREADS
    # Deferred a day (the same statement and indexes), so the round trips measured next do not queue behind them.
    deferred = greet.using(run_after=LATER)

    def enqueue(index):
        for number in range(share):
            deferred.enqueue(f"guest {index}-{number}")

    return share * THREADS / lifecycle_bench.run_workers(THREADS, enqueue)


def launch_statement_limit(url: str, seconds: int) -> float:
    """pgbench's rate for the launch statement alone, with a task's launch and input, at THREADS clients."""
    from scheduler.stack.demo_tasks import greet
    from scheduler.tasks import options

    body = options.launch_body_for(greet, {"args": ["guest"], "kwargs": {}}, {})
    quoted = {"launch": json.dumps(body["launch"]), "input": json.dumps(body["input"])}
    one = {
        "run_ids": "'pgbench-' || :client_id || '-' || :n", "org_ids": "NULL",
        "play_names": "'scheduler.stack.demo_tasks:greet'", "graph_hashes": "NULL", "runtime_profiles": "NULL",
        "definition_scopes": "NULL", "launches": "'" + quoted["launch"] + "'", "inputs": "'" + quoted["input"] + "'",
        "run_log_stores": "NULL", "max_attempts": "3", "wait_deadlines": "NULL", "idempotency_keys": "NULL",
        "idempotency_digests": "NULL", "priorities": "0", "run_afters": f"'{LATER.isoformat()}'",
        "concurrency_keys": "NULL", "concurrency_limits": "NULL",
    }
    # A launch of one run: each array of the batch statement holds one element.
    values = {"release_keys": "'{}'", **{name: f"ARRAY[{value}]" for name, value in one.items()}}
    script = "\\set n random(1, 2000000000)\n" + harness.replay_statement("runs_launch", values)
    return harness.pgbench_run(url, script, THREADS, seconds)


def _start_stack(bench_url: str, port: int) -> list[subprocess.Popen]:
    env = dict(os.environ, DATABASE_URL=bench_url, LOG_LEVEL="WARNING", SCHEDULER_PUBLIC_API_URL=f"http://127.0.0.1:{port}",
               SCHEDULER_SANDBOX_DIR=str(harness.PROJECT_DIR / ".embedded" / "bench-sandboxes"))
    api = [sys.executable, "-m", "gunicorn", "-c", str(harness.PROJECT_DIR / "config" / "gunicorn.conf.py"),
           "--bind", f"127.0.0.1:{port}", "--access-logfile", "/dev/null"]
    manage = [sys.executable, str(harness.PROJECT_DIR / "manage.py")]
    commands = [api, [*manage, "dispatch_runs", "--interval", "1"], [*manage, "run_sandbox_cleanup", "--interval", "1"]]
    processes = [subprocess.Popen(command, cwd=harness.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for command in commands]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return processes
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the API did not start")


def enqueue_to_finished(bench_url: str, count: int) -> list[float]:
    """Seconds from enqueue to a finished result, one task at a time, polled as a caller would (every 20 ms)."""
    from scheduler.stack.demo_tasks import greet

    processes = _start_stack(bench_url, terminal_latency.free_port())
    try:
        samples = []
        for number in range(count + 2):
            started = time.perf_counter()
            result = greet.enqueue(f"caller {number}")
            while not result.is_finished:
                time.sleep(0.02)
                result.refresh()
            if result.return_value != {"greeting": f"hello, caller {number}"}:
                raise SystemExit(f"task {result.id} answered {result.return_value!r}")
            if number >= 2:  # the first two warm the dispatcher's connection and the page cache
                samples.append(time.perf_counter() - started)
        return samples
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(30)


def main():
    parser = harness.arguments("200 enqueues, 5 s of pgbench and 10 round trips instead of 1,000, 10 s and 30")
    args = parser.parse_args()
    count, seconds, trips = (200, 5, 10) if args.quick else (1_000, 10, 30)
    bench_url = harness.recreate_database(harness.server_url())
    harness.setup_django(bench_url)
    harness.quiesce(bench_url)
    rate = enqueue_rate(count)
    limit = launch_statement_limit(bench_url, seconds)
    latencies = enqueue_to_finished(bench_url, trips)
    p50 = harness.percentile(latencies, 0.5) * 1000
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"{count:,} tasks enqueued from {THREADS} threads (tasks/s)", f"{rate:.0f}",
             f"pgbench launch statement {limit:.0f}/s", f"{rate / limit:.2f}", ">= 0.5"),
            (f"enqueue -> finished, instant local sandbox, p50 of {trips} (ms)", f"{p50:.0f}",
             f"p90 {harness.percentile(latencies, 0.9) * 1000:.0f} ms", f"{p50:.0f}", "<= 2000")]
    harness.report(f"tasks benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
