"""Lifecycle benchmarks (issue 3): settlement throughput, the full claim->settle
cycle against pgqueuer and procrastinate, and runner-terminal latency through
gunicorn. Prints one table. Run: ./dev bench lifecycle [--quick]
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import harness

SETTLE_ATTEMPTS = 20_000
CYCLE_RUNS = 20_000
HTTP_REQUESTS = 4_000
CLIENT_PROCESSES = 4


def seed_parked(count: int, prefix: str) -> list[tuple[str, str]]:
    """Parked runs (waiting on attempt 1 in a local sandbox), written in bulk."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, suspension_json, max_attempts, started_at)
            SELECT %(prefix)s || i, 'org', 'bench', 'waiting', '{}'::jsonb,
                   jsonb_build_object('kind', 'detached_runner', 'runnerAttempt', 1,
                       'runtimeSandboxRef', jsonb_build_object('provider', 'local', 'sandboxId', 'sb-' || %(prefix)s || i),
                       'startedAtMs', 0, 'heartbeatTimeoutMs', 30000),
                   1, now()
            FROM generate_series(1, %(count)s) AS i;
            INSERT INTO attempts (run_id, attempt, status, lease_token, lease_expires_at)
            SELECT %(prefix)s || i, 1, 'waiting', 'lease-' || i, now() + interval '1 hour'
            FROM generate_series(1, %(count)s) AS i;
            ANALYZE runs; ANALYZE attempts;
            """,
            {"prefix": prefix, "count": count},
        )
    return [(f"{prefix}{i}", f"lease-{i}") for i in range(1, count + 1)]


def seed_queued(count: int, prefix: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
            SELECT %(prefix)s || lpad(i::text, 8, '0'), 'org', 'bench', 'queued', '{}'::jsonb, 1,
                   now() + i * interval '1 microsecond'
            FROM generate_series(1, %(count)s) AS i;
            INSERT INTO outbox (event_id, run_id, event_type, payload_json)
            SELECT %(prefix)s || lpad(i::text, 8, '0') || ':run.created', %(prefix)s || lpad(i::text, 8, '0'), 'run.created', '{}'
            FROM generate_series(1, %(count)s) AS i;
            ANALYZE runs; ANALYZE outbox;
            """,
            {"prefix": prefix, "count": count},
        )


RESULT = {"status": "completed", "output": {"ok": True},
          "stats": {"runtimeResources": {"cpuMs": 1, "wallMs": 2, "peakMemoryBytes": 3}}}


def run_workers(count: int, work) -> float:
    from django.db import connections

    barrier = threading.Barrier(count + 1)
    errors = []

    def worker(index):
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


SETTLE_BATCH = 32


def bench_settlement(count: int, batch: int) -> float:
    """4 settlers, each settling its share `batch` attempts per statement (1: one statement per attempt)."""
    from scheduler.runs import settlement

    parked = seed_parked(count, f"settle-{batch}-")
    settlers = 4

    def settle_slice(index):
        mine = parked[index::settlers]
        for start in range(0, len(mine), batch):
            answers = settlement.settle_attempts(
                [settlement.Settlement(run_id, 1, lease, RESULT) for run_id, lease in mine[start:start + batch]])
            assert all(answer.run_status == "completed" for answer in answers), answers

    return count / run_workers(settlers, settle_slice)


def bench_full_cycle(count: int, prefix: str = "cycle-") -> float:
    """8 workers claim one run per claim and wait until its terminal committed; the process's
    group settler (as the web process uses) shares settle statements between them."""
    from scheduler.runs import lifecycle, settlement, settler

    seed_queued(count, prefix)
    done = [0] * 8
    group = settler.BatchSettler(max_batch=8)

    def cycle(index):
        while True:
            claims = lifecycle.claim_queued_runs(1)
            if not claims:
                return
            claim = claims[0]
            settled = group.settle(settlement.Settlement(claim.run_id, claim.attempt, claim.lease_token, RESULT))
            if settled.run_status == "completed":
                done[index] += 1

    try:
        elapsed = run_workers(8, cycle)
    finally:
        group.close()
    assert sum(done) == count, sum(done)
    return count / elapsed


OUTBOX_WAKE = "pgtrigger_outbox_wake_drainers_edbaf"
RUN_QUEUED_WAKE = "pgtrigger_run_queued_wakes_dispatchers_0b30d"


def notify_cycles(count: int) -> dict[str, float]:
    """The cycle with the wake triggers as built (busy listeners disarm them: no NOTIFY), with them disabled,
    and with every statement notifying, as before wake signals (a notifying commit takes the notify lock)."""
    from django.db import connection, connections

    bench_full_cycle(max(100, count // 4), "notify-warm-")  # the workers' connections and plans, not counted
    connections.close_all()
    rates = {"as built": bench_full_cycle(count, "notify-built-")}
    connections.close_all()
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE outbox DISABLE TRIGGER {OUTBOX_WAKE}")
        cursor.execute(f"ALTER TABLE runs DISABLE TRIGGER {RUN_QUEUED_WAKE}")
    rates["off"] = bench_full_cycle(count, "notify-off-")
    connections.close_all()
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE outbox ENABLE TRIGGER {OUTBOX_WAKE}")
        cursor.execute(f"ALTER TABLE runs ENABLE TRIGGER {RUN_QUEUED_WAKE}")
        for function, channel in ((OUTBOX_WAKE, "outbox_wake"), (RUN_QUEUED_WAKE, "run_queued")):
            cursor.execute(f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $fn$ BEGIN "
                           f"PERFORM pg_notify(TG_TABLE_SCHEMA || '_{channel}', ''); RETURN NULL; END; $fn$ "
                           "LANGUAGE plpgsql")
    rates["every statement notifies"] = bench_full_cycle(count, "notify-every-")
    connections.close_all()
    return rates


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


WARM_UP_REQUESTS = 3


def bench_http_terminal(bench_url: str, count: int, clients: int = 16, prefix: str = "http") -> tuple[float, float, float]:
    from scheduler.runs.tokens import mint_runner_token

    parked = seed_parked(count, f"{prefix}-{clients}-")
    harness.quiesce(bench_url)
    port = free_port()
    env = dict(os.environ, DATABASE_URL=bench_url, SCHEDULER_WEB_WORKERS="2", SCHEDULER_WEB_THREADS="8",
               CONN_MAX_AGE="60", SECRET_KEY=os.environ["SECRET_KEY"])
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(harness.PROJECT_DIR / "config" / "gunicorn.conf.py"),
         "--bind", f"127.0.0.1:{port}", "--access-logfile", "/dev/null"],
        cwd=harness.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        # Every request made before the clock starts: the clients share the 2 cores with the server under test.
        requests = [(json.dumps({"runId": run_id, "attempt": 1, "leaseToken": lease, "result": RESULT}),
                     {"Content-Type": "application/json", "Authorization": f"Bearer {mint_runner_token(run_id, 1, lease)}"})
                    for run_id, lease in parked]
        latencies, elapsed = http_clients(port, requests, clients)
        return harness.percentile(latencies, 0.5) * 1000, harness.percentile(latencies, 0.99) * 1000, count / elapsed
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def _client_process(port: int, requests: list, clients: int, mine: range, start, pipe) -> None:
    """Clients `mine` (threads of this process): each sends its share of `requests` one after another."""
    latencies: list[float] = []
    lock = threading.Lock()

    def client(index):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        own = []
        for body, headers in requests[index::clients]:
            started = time.perf_counter()
            conn.request("POST", "/internal/runner/terminal", body, headers)
            response = conn.getresponse()
            response.read()
            own.append(time.perf_counter() - started)
            assert response.status == 200, response.status
        with lock:
            # Steady state: each client's first requests also open the server thread's database connection and
            # prepare its statements (warm-up, not latency).
            latencies.extend(own[WARM_UP_REQUESTS:])

    threads = [threading.Thread(target=client, args=(index,)) for index in mine]
    start.wait()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pipe.send(latencies)
    pipe.close()


def http_clients(port: int, requests: list, clients: int) -> tuple[list[float], float]:
    """Run `clients` HTTP clients spread over up to CLIENT_PROCESSES processes (runners are processes of their
    own: one process's GIL would add its own queueing to every latency); (latencies, elapsed seconds)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    processes = min(CLIENT_PROCESSES, clients)
    start = context.Barrier(processes + 1)
    pipes, children = [], []
    for number in range(processes):
        receiver, sender = context.Pipe(duplex=False)
        child = context.Process(target=_client_process,
                                args=(port, requests, clients, range(number, clients, processes), start, sender))
        child.start()
        pipes.append(receiver)
        children.append(child)
    start.wait()
    started = time.perf_counter()
    latencies = [latency for receiver in pipes for latency in receiver.recv()]
    elapsed = time.perf_counter() - started
    for child in children:
        child.join()
        assert child.exitcode == 0, f"an HTTP client process failed ({child.exitcode})"
    return latencies, elapsed


def bench_peers(server_url: str, count: int) -> dict[str, float]:
    """Run the peer drivers in their own virtual environment (bench/peers/)."""
    python = harness.PROJECT_DIR / "bench" / ".peers-venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r",
                        str(harness.PROJECT_DIR / "bench" / "peers" / "requirements.txt")], check=True)
    rates = {}
    for peer in ("procrastinate", "pgqueuer"):
        url = harness.recreate_database(server_url, f"peer_{peer}")
        output = subprocess.run(
            [str(python), str(harness.PROJECT_DIR / "bench" / "peers" / f"{peer}_driver.py"),
             url, str(count), "8"],
            capture_output=True, text=True, check=True,
        ).stdout
        rates[peer] = float(json.loads(output.strip().splitlines()[-1])["jobs_per_second"])
    return rates


def main():
    parser = harness.arguments("a tenth of the sizes, for a smoke run")
    parser.add_argument("--skip-peers", action="store_true", help="leave procrastinate and pgqueuer out")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    server_url = harness.server_url()
    bench_url = harness.recreate_database(server_url)
    harness.setup_django(bench_url)
    from django.db import connections

    settled = bench_settlement(SETTLE_ATTEMPTS // scale, SETTLE_BATCH)
    connections.close_all()
    settled_alone = bench_settlement(SETTLE_ATTEMPTS // scale // 4, 1)
    connections.close_all()
    limit = harness.pgbench_limit(bench_url, harness.CLAIM_AND_UPDATE, clients=4)
    cycle = bench_full_cycle(CYCLE_RUNS // scale)
    connections.close_all()
    latency = {clients: bench_http_terminal(bench_url, HTTP_REQUESTS // scale, clients) for clients in (1, 16, 64)}
    connections.close_all()
    notify = notify_cycles(CYCLE_RUNS // scale)  # last: it rewrites the wake triggers of the bench database
    rows = [("measure", "value", "reference", "ratio", "target")]
    rows.append((f"settlement, 4 settlers, {SETTLE_BATCH} per statement (terminals/s)", f"{settled:.0f}",
                 f"pgbench claim+update c=4: {limit:.0f} tps", f"{settled / limit:.2f}", ">= 1.50"))
    rows.append(("  the same, one attempt per statement", f"{settled_alone:.0f}", "", f"{settled_alone / limit:.2f}", ""))
    peers = {} if args.skip_peers else bench_peers(server_url, CYCLE_RUNS // scale)
    rows.append(("full cycle claim->settle, 8 workers (runs/s)", f"{cycle:.0f}", "", "", ""))
    for name, rate in peers.items():
        rows.append((f"  vs {name}, 8 workers (jobs/s)", f"{rate:.0f}", f"{name}", f"{cycle / rate:.2f}", ">= 1.50"))
    for mode in ("as built", "every statement notifies"):
        rows.append((f"  the cycle, wake notifications {mode} (runs/s)", f"{notify[mode]:.0f}",
                     f"notifications off: {notify['off']:.0f} runs/s", f"{notify[mode] / notify['off']:.2f}",
                     ">= 0.90" if mode == "as built" else ""))
    for clients, (p50, p99, http_rate) in latency.items():
        rows.append((f"POST /internal/runner/terminal, {clients} client(s): p99 (ms)", f"{p99:.1f}",
                     f"p50 {p50:.1f} ms, {http_rate:.0f} req/s", f"{p99:.1f}", "<= 20" if clients == 16 else ""))
    harness.report(f"lifecycle benchmark ({'quick' if args.quick else 'full'}; server "
                   f"{harness.libpq_params(server_url)['host']})", rows, args.check)


if __name__ == "__main__":
    main()
