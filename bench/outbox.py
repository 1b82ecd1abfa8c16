"""Outbox delivery benchmark (issue 5): 100,000 facts over 10,000 runs drained by
1, 2 and 4 drainer processes into the built-in receiver; facts/s against the
pgbench single-row-update limit on the same server, and against a pgbench
replay of the drainer's own statements (list ready runs; then, in one
transaction, lock, read the prefixes, store-and-ack them into the built-in
receiver) from 4 clients on the same backlog: what the statements can do
without the Python around them. Then end-to-end lag p50/p99 with a producer
whose facts arrive one at a time, each its run's whole prefix, at 25% of what
4 drainers deliver of that shape (50,000 one-fact runs); and, as a reference
without a target, at 25% of the 8-fact-prefix backlog rate, which is more
than 4 drainers deliver one fact per prefix.
Run: ./dev bench outbox [--quick] [--check]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import harness

RUNS, FACTS_PER_RUN = 10_000, 10


def seed_backlog(runs: int, facts_per_run: int, launch: dict | None = None) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE outbox, run_ledger_events")
        cursor.execute("DELETE FROM runs WHERE run_id LIKE 'obx-%%'")
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json)
            SELECT 'obx-' || lpad(r::text, 6, '0'), 'org', 'bench', 'running', %(launch)s::jsonb
            FROM generate_series(1, %(runs)s) AS r;
            INSERT INTO outbox (event_id, run_id, event_type, payload_json, created_at)
            SELECT 'obx-' || lpad(r::text, 6, '0') || ':' || f,
                   'obx-' || lpad(r::text, 6, '0'),
                   CASE WHEN %(facts)s = 1 THEN 'run.progress' WHEN f = 1 THEN 'run.created'
                        WHEN f = %(facts)s THEN 'run.completed' ELSE 'run.progress' END,
                   jsonb_build_object('n', f), clock_timestamp() + (f * 1000 + r) * interval '1 microsecond'
            FROM generate_series(1, %(runs)s) AS r, generate_series(1, %(facts)s) AS f;
            ANALYZE runs; ANALYZE outbox;
            """,
            {"runs": runs, "facts": facts_per_run, "launch": json.dumps(launch or {})},
        )


def drainer(bench_url: str, *args: str) -> subprocess.Popen:
    """A drain_outbox process; what it logs (warnings and worse) is kept for a failure's message."""
    env = dict(os.environ, DATABASE_URL=bench_url, LOG_LEVEL="WARNING")
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([sys.executable, str(harness.PROJECT_DIR / "manage.py"), "drain_outbox", *args],
                               cwd=harness.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=log)
    process.log = log
    return process


def logged(processes: list[subprocess.Popen]) -> str:
    """The drainers' exit codes and the end of what each logged."""
    parts = []
    for process in processes:
        process.log.seek(0)
        tail = process.log.read().decode(errors="replace")[-1500:]
        parts.append(f"drainer exited {process.returncode}: {tail.strip() or '(nothing logged)'}")
    return "\n".join(parts)


def delivered_rate(builtin: bool = True) -> tuple[int, float]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), extract(epoch FROM max(delivered_at) - min(delivered_at)) FROM outbox "
                       "WHERE delivered_at IS NOT NULL")
        count, seconds = cursor.fetchone()
        cursor.execute("SELECT count(*), count(DISTINCT run_id), count(lease_owner), count(failed_at), "
                       "count(next_attempt_at) FROM outbox WHERE delivered_at IS NULL")
        left, runs, leased, failed, backing_off = cursor.fetchone()
        assert left == 0, (f"{left} facts of {runs} runs left undelivered ({leased} leased, {failed} failed, "
                           f"{backing_off} backing off)")
        if builtin:
            cursor.execute("SELECT count(*) FROM run_ledger_events")
            assert cursor.fetchone()[0] == count, "receiver and outbox disagree"
    return count, count / max(float(seconds), 1e-9)


def drain_backlog(bench_url: str, drainers: int, runs: int, launch: dict | None = None,
                  facts_per_run: int = FACTS_PER_RUN) -> float:
    """Facts/s from the first delivery to the last (delivered_at), each drainer running one tick (`--once`);
    facts one tick leaves behind fail the bench with the drainers' own words."""
    seed_backlog(runs, facts_per_run, launch)
    processes = [drainer(bench_url, "--once", "--batch", "100000") for _ in range(drainers)]
    for process in processes:
        process.wait()
    try:
        return delivered_rate(builtin=launch is None)[1]
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{logged(processes)}") from None


def _inline(name: str, values: dict[str, str]) -> str:
    return harness.replay_statement(name, values).rstrip().rstrip(";")


def replay_script() -> str:
    """One drainer claim cycle as pgbench commands: the named blocks with pgbench variables for parameters.

    The glue between them is SQL (a listing's run ids aggregated into an array; the read facts' ids and their
    terminals' payloads), since pgbench keeps only one-row answers.
    """
    from scheduler.kinds import TERMINAL_FACT_TYPES
    from scheduler.outbox import claims, drainer as drainer_module

    owner = "'replay-' || :client_id"
    values = {"lane": "'ledger'", "admission_first": "true", "limit": str(drainer_module.CANDIDATES),
              "exclude_run_ids": "'{}'", "run_ids": ":candidates", "lease_owner": owner,
              "max_facts": str(claims.MAX_PREFIX), "payloads": ":payloads", "event_ids": ":event_ids", "events": "'[]'",
              **{key: f"'{value}'" for key, value in claims.CLAIM_TIMEOUTS.items()},
              # The backlog's shape: every run holds a pending terminal (walked), none a wait.
              "enumerate_terminals": "false", "walk_terminals": "true", "enumerate_waits": "false",
              "walk_waits": "false",
              "terminal_types": "'{" + ",".join(TERMINAL_FACT_TYPES) + "}'"}
    listing = _inline("outbox_list_ready_runs_walking", values)
    lock = _inline("outbox_lock_runs", {**values, "limit": str(drainer_module.RUNS_PER_CLAIM)})
    read = _inline("outbox_read_prefixes", values)
    return (f"SELECT coalesce(array_agg(ready.run_id), '{{}}') AS candidates FROM ({listing}) AS ready\n\\gset\n"
            "BEGIN;\n"
            f"SELECT coalesce(array_agg(locked.run_id), '{{}}') AS candidates FROM ({lock}) AS locked\n\\gset\n"
            # The terminals' payloads go back as given (the drainer sends them after its TRM-6 check).
            "SELECT coalesce(jsonb_object_agg(prefix.event_id, prefix.payload_json) "
            "FILTER (WHERE prefix.payload_json IS NOT NULL), '{}') AS payloads, "
            f"coalesce(array_agg(prefix.event_id), '{{}}') AS event_ids FROM ({read}) AS prefix\n\\gset\n"
            + harness.replay_statement("run_ledger_store_and_ack", values)
            + "COMMIT;\n")


def replay_rate(bench_url: str, runs: int, seconds: int) -> float:
    """Facts/s the replay delivers from the same backlog the drainers drained, at 4 clients."""
    seed_backlog(runs, FACTS_PER_RUN)
    harness.pgbench_run(bench_url, replay_script(), 4, seconds, prepared=True)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), extract(epoch FROM max(delivered_at) - min(delivered_at)) FROM outbox "
                       "WHERE delivered_at IS NOT NULL")
        count, span = cursor.fetchone()
    return count / max(float(span or 0), 1e-9)


def lag_at(bench_url: str, rate: float, seconds: float) -> tuple[float, float, int]:
    """Produce `rate` facts/s for `seconds` while 4 drainers run; lag = delivered_at - created_at."""
    from django.db import connection, connections

    seed_backlog(1, 1)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE outbox, run_ledger_events")
        cursor.execute("INSERT INTO runs (run_id, play_name, status, launch_json) SELECT 'lag-' || r, 'bench', 'running', '{}' "
                       "FROM generate_series(1, 2000) AS r ON CONFLICT DO NOTHING")
        # The backlog phases left statistics of a 100,000-row outbox behind the TRUNCATE.
        cursor.execute("ANALYZE outbox")
        cursor.execute("ANALYZE runs")
    processes = [drainer(bench_url, "--interval", "0.2") for _ in range(4)]
    time.sleep(3)  # let the drainers start and LISTEN
    stop = time.monotonic() + seconds
    produced = 0

    def produce():
        nonlocal produced
        tick = 0.02
        with connections["default"].cursor() as cursor:
            while time.monotonic() < stop:
                batch = max(1, int(rate * tick))
                cursor.execute(
                    "INSERT INTO outbox (event_id, run_id, event_type, payload_json) "
                    "SELECT 'lag-' || %(n)s || '-' || i, 'lag-' || (1 + (%(n)s + i) %% 2000), 'run.progress', '{}' "
                    "FROM generate_series(1, %(batch)s) AS i",
                    {"n": produced, "batch": batch},
                )
                produced += batch
                time.sleep(tick)
        connections.close_all()

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join()
    deadline = time.monotonic() + 60
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM outbox WHERE delivered_at IS NULL")
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.2)
        cursor.execute("SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM delivered_at - created_at)) "
                       "FROM outbox WHERE delivered_at IS NOT NULL")
        p50, p99 = cursor.fetchone()[0]
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        process.wait(60)
    return p50 * 1000, p99 * 1000, produced


def main():
    parser = harness.arguments("a tenth of the runs and a short lag phase")
    args = parser.parse_args()
    runs = RUNS // 10 if args.quick else RUNS
    server_url = harness.server_url()
    bench_url = harness.recreate_database(server_url)
    harness.setup_django(bench_url)
    from django.db import connections

    rates = {}
    for drainers in (1, 2, 4):
        rates[drainers] = drain_backlog(bench_url, drainers, runs)
        connections.close_all()
    from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver

    receiver = FakeReceiver()
    try:
        # The seed's protocol over loopback HTTP: a dispatch token, then one fact per request (no batching grant
        # on a mutable origin), on pooled connections.
        over_http = drain_backlog(bench_url, 4, runs // 10,
                                  {"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN})
    finally:
        receiver.close()
    connections.close_all()
    limit = harness.pgbench_limit(bench_url, harness.SINGLE_ROW_UPDATE, clients=4)
    replay = replay_rate(bench_url, runs, 3 if args.quick else 10)
    # The lag phase's facts arrive one at a time, each its run's whole prefix: its load is a share of what 4
    # drainers deliver of that shape (a prefix per fact), not of the 8-fact prefixes of the backlog above.
    single = drain_backlog(bench_url, 4, runs * FACTS_PER_RUN // 2, facts_per_run=1)
    connections.close_all()
    p50, p99, produced = lag_at(bench_url, single * 0.25, 5 if args.quick else 15)
    over_p50, over_p99, _ = lag_at(bench_url, rates[4] * 0.25, 5 if args.quick else 15)
    rows = [("measure", "value", "reference", "ratio", "target")]
    for drainers, rate in rates.items():
        rows.append((f"{runs * FACTS_PER_RUN:,} facts, {drainers} drainer(s) (facts/s)", f"{rate:.0f}",
                     f"pgbench single-row update c=4: {limit:.0f} tps" if drainers == 4 else "",
                     f"{rate / limit:.2f}" if drainers == 4 else "", ">= 0.40" if drainers == 4 else ""))
    rows.append(("4 drainers against a replay of their statements, pgbench c=4 (facts/s)", f"{rates[4]:.0f}",
                 f"replay: {replay:.0f} facts/s", f"{rates[4] / replay:.2f}", ">= 0.50"))
    rows.append((f"{runs // 10 * FACTS_PER_RUN:,} facts to a loopback HTTP receiver, 4 drainers (facts/s)",
                 f"{over_http:.0f}", "one fact per request", "", ""))
    rows.append((f"{runs * FACTS_PER_RUN // 2:,} one-fact runs, 4 drainers (facts/s)", f"{single:.0f}",
                 "a prefix per fact, as the lag phase's facts arrive", "", ""))
    rows.append((f"lag at 25% of that rate ({single * 0.25:.0f} facts/s, {produced:,} facts): p99 (ms)",
                 f"{p99:.0f}", f"p50 {p50:.0f} ms", f"{p99:.1f}", "<= 25"))
    rows.append((f"  lag at 25% of the 8-fact-prefix rate ({rates[4] * 0.25:.0f} facts/s, one per prefix): p99 (ms)",
                 f"{over_p99:.0f}", f"p50 {over_p50:.0f} ms; {rates[4] * 0.25 / single:.0%} of the one-fact rate",
                 "", ""))
    harness.report(f"outbox delivery benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
