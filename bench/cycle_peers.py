"""The claim -> settle cycle beside its peers, for lifecycle.py's table.

The judged comparison runs both sides one job per claim: 8 of our workers each
claim one run at a time, against pgqueuer's 8 queue managers with batch_size 1
and procrastinate's 8 workers. Neither side runs that way in production, so two
more rows (no target) show each in its own shape: one of our dispatchers
claims as many runs as it has free slots (DispatchPool's rule), and pgqueuer
runs one queue manager dequeuing and completing 8 jobs at a time (the same
number of slots; its default batch is 10).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import harness

PEERS = ("procrastinate", "pgqueuer")
SLOTS = 8
# Per peer and batch size, each drain's CPU a job (ms): the peer's own process and the rest of the machine.
PEER_CPU: dict[tuple[str, int], list[dict[str, float]]] = {}


def bench_peer(server_url: str, peer: str, count: int, workers: int = SLOTS, batch_size: int = 1) -> float:
    """One peer's drain of `count` jobs by `workers` workers, in its own virtual environment (bench/peers/) and
    database; pgqueuer's managers dequeue `batch_size` jobs at a time."""
    python = harness.PROJECT_DIR / "bench" / ".peers-venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-r",
                        str(harness.PROJECT_DIR / "bench" / "peers" / "requirements.txt")], check=True)
    url = harness.recreate_database(server_url, f"peer_{peer}")
    output = subprocess.run(
        [str(python), str(harness.PROJECT_DIR / "bench" / "peers" / f"{peer}_driver.py"), url, str(count),
         str(workers), str(batch_size)],
        capture_output=True, text=True, check=True,
    ).stdout
    answer = json.loads(output.strip().splitlines()[-1])
    PEER_CPU.setdefault((peer, batch_size), []).append({key: answer[key] for key in ("python_ms", "rest_ms")})
    return float(answer["jobs_per_second"])


def bench_dispatcher_cycle(count: int, prefix: str) -> float:
    """One claimer claims as many queued runs as it has free slots of SLOTS in one statement (a dispatcher's rule:
    no claim waits for a slot while its lease runs); SLOTS threads each settle theirs through the group settler."""
    from django.db import connections

    from lifecycle import RESULT, seed_queued
    from scheduler.runs import lifecycle, settlement, settler

    seed_queued(count, prefix)
    connections.close_all()
    group, free, work = settler.BatchSettler(max_batch=SLOTS), threading.Semaphore(SLOTS), queue.SimpleQueue()
    settled = []

    def slot():
        try:
            while (claim := work.get()) is not None:
                item = settlement.Settlement(claim.run_id, claim.attempt, claim.lease_token, RESULT)
                settled.append(group.settle(item).run_status)
                free.release()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=slot) for _ in range(SLOTS)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    try:
        while True:
            free.acquire()  # at least one free slot, then every other one free now
            wanted = 1 + sum(1 for _ in range(SLOTS - 1) if free.acquire(blocking=False))
            claims = lifecycle.claim_queued_runs(wanted)
            for claim in claims:
                work.put(claim)
            for _ in range(wanted - len(claims)):
                free.release()
            if not claims:
                break
        for _ in range(SLOTS):
            free.acquire()  # every slot's settlement committed
        elapsed = time.perf_counter() - started
    finally:
        for _ in threads:
            work.put(None)
        for thread in threads:
            thread.join()
        group.close()
        connections.close_all()
    assert settled.count("completed") == count, len(settled)
    return count / elapsed
