"""The runner terminal's latency through gunicorn (`POST /internal/runner/terminal`): parked runs, a server of
its own, and HTTP clients spread over processes, as runners are. Used by the lifecycle and retention benches.
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

CLIENT_PROCESSES = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


WARM_UP_REQUESTS = 3


def bench_http_terminal(bench_url: str, count: int, clients: int = 16, prefix: str = "http",
                        connection_each: bool = False) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, requests/s). `connection_each`: a connection per request, closed by the client after the
    answer, as the sandbox runner sends them (urllib); otherwise each client keeps one connection alive."""
    from scheduler.runs.tokens import mint_runner_token

    from lifecycle import RESULT, seed_parked  # here: lifecycle imports this module at its top

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
        latencies, elapsed = http_clients(port, requests, clients, connection_each)
        return harness.percentile(latencies, 0.5) * 1000, harness.percentile(latencies, 0.99) * 1000, count / elapsed
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def _client_process(port: int, requests: list, clients: int, mine: range, start, pipe, connection_each: bool) -> None:
    """Clients `mine` (threads of this process): each sends its share of `requests` one after another."""
    latencies: list[float] = []
    lock = threading.Lock()

    def client(index):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        own = []
        for body, headers in requests[index::clients]:
            started = time.perf_counter()
            if connection_each:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                headers = {**headers, "Connection": "close"}
            conn.request("POST", "/internal/runner/terminal", body, headers)
            response = conn.getresponse()
            response.read()
            if connection_each:
                conn.close()
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


def http_clients(port: int, requests: list, clients: int, connection_each: bool = False) -> tuple[list[float], float]:
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
                                args=(port, requests, clients, range(number, clients, processes), start, sender,
                                      connection_each))
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
