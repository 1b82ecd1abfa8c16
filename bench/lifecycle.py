"""Lifecycle benchmarks (issue 3): settlement throughput, the full claim->settle
cycle against pgqueuer and procrastinate, and runner-terminal latency through
gunicorn. Prints one table. Run: ./dev bench lifecycle [--quick]
"""

from __future__ import annotations

import os
import threading
import time

import harness
from cycle_peers import PEER_CPU, PEERS, SLOTS, bench_dispatcher_cycle, bench_peer
from terminal_latency import bench_http_terminal

SETTLE_ATTEMPTS = 20_000
CYCLE_RUNS = 20_000
HTTP_REQUESTS = 4_000


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


def bench_settlement(count: int, batch: int, prefix: str = "settle-") -> float:
    """4 settlers, each settling its share `batch` attempts per statement (1: one statement per attempt)."""
    from scheduler.runs import settlement

    parked = seed_parked(count, f"{prefix}{batch}-")
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

    meter = harness.CpuMeter()
    try:
        elapsed = run_workers(8, cycle)
    finally:
        group.close()
    CYCLE_CPU.append(meter.per_item(count))
    assert sum(done) == count, sum(done)
    return count / elapsed


# Per judged cycle: the CPU a run took in this process's Python workers and in the rest of the machine (ms).
CYCLE_CPU: list[dict[str, float]] = []


OUTBOX_WAKE = "pgtrigger_outbox_wake_drainers_edbaf"
RUN_QUEUED_WAKE = "pgtrigger_run_queued_wakes_dispatchers_0b30d"


def set_wake_triggers(enabled: bool) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for table, trigger in (("outbox", OUTBOX_WAKE), ("runs", RUN_QUEUED_WAKE)):
            cursor.execute(f"ALTER TABLE {table} {'ENABLE' if enabled else 'DISABLE'} TRIGGER {trigger}")


def notify_cycles(count: int) -> dict[str, list[float]]:
    """The cycle with the wake triggers as built (busy listeners disarm them: no NOTIFY) and with them disabled,
    interleaved; then once with every statement notifying, as before wake signals (a notifying commit takes the
    notify lock)."""
    from django.db import connection, connections

    bench_full_cycle(max(100, count // 4), "notify-warm-")  # the workers' connections and plans, not counted
    connections.close_all()

    def cycle(mode):
        def measure(repetition):
            set_wake_triggers(mode == "as built")
            rate = bench_full_cycle(count, f"notify-{mode[:3]}{repetition}-")
            connections.close_all()
            return rate
        return measure

    rates = harness.interleaved({"as built": cycle("as built"), "off": cycle("off")})
    set_wake_triggers(True)
    with connection.cursor() as cursor:
        for function, channel in ((OUTBOX_WAKE, "outbox_wake"), (RUN_QUEUED_WAKE, "run_queued")):
            cursor.execute(f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger AS $fn$ BEGIN "
                           f"PERFORM pg_notify(TG_TABLE_SCHEMA || '_{channel}', ''); RETURN NULL; END; $fn$ "
                           "LANGUAGE plpgsql")
    rates["every statement notifies"] = [bench_full_cycle(count, "notify-every-")]
    connections.close_all()
    return rates


def measured(values: list[float], unit: str = "", digits: int = 0) -> str:
    """A median with the spread of its repetitions, for a table's reference column."""
    return f"median of {len(values)}, {harness.spread(values, digits)}{unit}" if len(values) > 1 else ""


def cpu_row(label: str, drains: list[dict[str, float]], reference: str) -> tuple:
    """A row of where a drain's CPU went per item (medians over the repetitions), their sum in the reference:
    the peers' rows read the same way, so a rate can be told apart from a cost."""
    python, rest = (harness.median([drain[key] for drain in drains]) for key in ("python_ms", "rest_ms"))
    return (label, f"{python:.2f} / {rest:.2f}", f"{reference}; together {python + rest:.2f}", "", "")


def compare(rows: list, label: str, ours: list[float], theirs: list[float], reference: str, target: str) -> None:
    """A row judged on the ratio of the two medians, with both spreads printed."""
    rows.append((label, f"{harness.median(ours):.0f}",
                 f"{reference} {harness.median(theirs):.0f} ({measured(theirs)}); ours {harness.spread(ours)}",
                 f"{harness.median(ours) / harness.median(theirs):.2f}", target))


def cycle_rows(rows: list, cycled: dict[str, list[float]], *, peers: bool) -> None:
    """The cycle's rows: its rate and CPU a run, each peer's rate (judged) and CPU a job, the production shapes."""
    rows.append(("full cycle claim->settle, 8 workers (runs/s)", f"{harness.median(cycled['ours']):.0f}",
                 measured(cycled["ours"]), "", ""))
    cores = f"of {os.cpu_count() * 1000 / max(harness.median(cycled['ours']), 1):.2f} ms the machine's {os.cpu_count()} cores have a run"
    rows.append(cpu_row("  CPU per run: Python workers / the rest (PostgreSQL) (ms)", CYCLE_CPU[:harness.REPETITIONS], cores))
    ours_cpu = harness.median([drain["python_ms"] + drain["rest_ms"] for drain in CYCLE_CPU[:harness.REPETITIONS]])
    for peer in PEERS if peers else ():  # the peer's rate as the value (what the report plots)
        # The rate is judged against procrastinate only: against pgqueuer it was the wrong target (a run writes an
        # attempt, facts, a billing job and a cleanup obligation under per-run fences; a no-op job writes one row),
        # which issues 32 and 35 measured. What each costs the machine is judged against both, below.
        rows.append((f"  vs {peer}, 8 workers (jobs/s)", f"{harness.median(cycled[peer]):.0f}",
                     f"{peer} {measured(cycled[peer])}",
                     f"{harness.median(cycled['ours']) / harness.median(cycled[peer]):.2f}",
                     ">= 1.50" if peer == "procrastinate" else ""))
        rows.append(cpu_row(f"    {peer}'s CPU per job: its process / the rest (PostgreSQL) (ms)", PEER_CPU[(peer, 1)],
                            "read as ours is"))
        theirs = harness.median([drain["python_ms"] + drain["rest_ms"] for drain in PEER_CPU[(peer, 1)]])
        rows.append((f"    the machine's CPU per run against {peer}'s per job (ms)", f"{ours_cpu:.2f}",
                     f"{peer} {theirs:.2f} (medians of interleaved repetitions)", f"{ours_cpu / theirs:.2f}",
                     "<= 1.00"))
    rows.append((f"  each in its production shape: one dispatcher claiming its free slots of {SLOTS} (runs/s)",
                 f"{harness.median(cycled['ours, one claimer']):.0f}", measured(cycled["ours, one claimer"]), "", ""))
    if peers:
        rows.append((f"    pgqueuer, one manager dequeuing and completing {SLOTS} at a time (jobs/s)",
                     f"{harness.median(cycled['pgqueuer, one manager']):.0f}",
                     f"pgqueuer {measured(cycled['pgqueuer, one manager'])}",
                     f"{harness.median(cycled['ours, one claimer']) / harness.median(cycled['pgqueuer, one manager']):.2f}",
                     ""))


def main():
    parser = harness.arguments("a tenth of the sizes, for a smoke run")
    parser.add_argument("--skip-peers", action="store_true", help="leave procrastinate and pgqueuer out")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    server_url = harness.server_url()
    bench_url = harness.recreate_database(server_url)
    harness.setup_django(bench_url)
    from django.db import connections

    def closing(measure):
        def run(repetition):
            try:
                return measure(repetition)
            finally:
                connections.close_all()
        return run

    settling = harness.interleaved({
        "ours": closing(lambda rep: bench_settlement(SETTLE_ATTEMPTS // scale, SETTLE_BATCH, f"settle{rep}-")),
        "pgbench": lambda rep: harness.pgbench_limit(bench_url, harness.CLAIM_AND_UPDATE, clients=4)})
    settled_alone = closing(lambda rep: bench_settlement(SETTLE_ATTEMPTS // scale // 4, 1, "alone-"))(0)
    cycles = {"ours": closing(lambda rep: bench_full_cycle(CYCLE_RUNS // scale, f"cycle{rep}-")),
              "ours, one claimer": closing(lambda rep: bench_dispatcher_cycle(CYCLE_RUNS // scale, f"slots{rep}-"))}
    if not args.skip_peers:
        cycles.update({peer: (lambda rep, peer=peer: bench_peer(server_url, peer, CYCLE_RUNS // scale))
                       for peer in PEERS})
        cycles["pgqueuer, one manager"] = lambda rep: bench_peer(server_url, "pgqueuer", CYCLE_RUNS // scale, 1, SLOTS)
    cycled = harness.interleaved(cycles)
    latency = {clients: [bench_http_terminal(bench_url, HTTP_REQUESTS // scale, clients, f"http{rep}")
                         for rep in range(harness.REPETITIONS if clients == 16 else 1)] for clients in (1, 16, 64)}
    # As the sandbox runner sends them: a connection per request (no target; the keep-alive rows are judged).
    each = bench_http_terminal(bench_url, HTTP_REQUESTS // scale, 16, "http-each", connection_each=True)
    connections.close_all()
    notify = notify_cycles(CYCLE_RUNS // scale)  # last: it rewrites the wake triggers of the bench database
    rows = [("measure", "value", "reference", "ratio", "target")]
    compare(rows, f"settlement, 4 settlers, {SETTLE_BATCH} per statement (terminals/s)", settling["ours"],
            settling["pgbench"], "pgbench claim+update c=4 (tps):", ">= 1.50")
    limit = harness.median(settling["pgbench"])
    rows.append(("  the same, one attempt per statement", f"{settled_alone:.0f}", "", f"{settled_alone / limit:.2f}", ""))
    cycle_rows(rows, cycled, peers=not args.skip_peers)
    compare(rows, "  the cycle, wake notifications as built (runs/s)", notify["as built"], notify["off"],
            "notifications off:", ">= 0.90")
    every = notify["every statement notifies"][0]
    rows.append(("  the cycle, every statement notifies (runs/s)", f"{every:.0f}", "",
                 f"{every / harness.median(notify['off']):.2f}", ""))
    for clients, runs in latency.items():
        p99 = harness.median([p99 for _, p99, _ in runs])
        rows.append((f"POST /internal/runner/terminal, {clients} client(s): p99 (ms)", f"{p99:.1f}",
                     f"p50 {harness.median([p50 for p50, _, _ in runs]):.1f} ms, "
                     f"{harness.median([rate for _, _, rate in runs]):.0f} req/s"
                     + (f"; p99 {measured([p99 for _, p99, _ in runs], ' ms', 1)}" if len(runs) > 1 else ""),
                     f"{p99:.1f}", "<= 20" if clients == 16 else ""))
    rows.append(("  the same, 16 clients, a connection per request: p99 (ms)", f"{each[1]:.1f}",
                 f"p50 {each[0]:.1f} ms, {each[2]:.0f} req/s", "", ""))
    harness.report(f"lifecycle benchmark ({'quick' if args.quick else 'full'}; server "
                   f"{harness.libpq_params(server_url)['host']})", rows, args.check)


if __name__ == "__main__":
    main()
