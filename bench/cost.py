"""The database cost of one whole run, phase by phase: write transactions (commits that flush WAL), WAL bytes
(and how many were full-page images) and server time for launch, claim, park, three heartbeats, settle, the
delivery of its four facts, cleanup (a fake Daytona accepts the delete) and billing; then the same runs with
SCHEDULER_PREPARE_STATEMENTS=false (what a transaction-pooling PgBouncer older than 1.21 costs).

Server time is pg_stat_statements' planning plus execution time of every statement: on the embedded server the
bench starts a private one with the extension preloaded (a commit's wait for its WAL flush is the disk's, not
the statements'; pg_stat_database.active_time, which counts it, is shown beside). Every phase runs on this
process's one connection, so the statement counters are this work's alone; the WAL position is the server's,
so autovacuum's and checkpoints' WAL during a phase counts too (on PostgreSQL 18 the WAL this connection wrote is
shown beside it). Targets: at most 2 ms of server time and 16 KB of WAL per run.

Run: ./dev bench cost [--quick] [--check]   (by hand, never in CI)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time

import harness

RUNS = 300
ORG = "org-cost"
PHASES = ("launch", "claim", "park", "heartbeats x3", "settle", "deliver 4 facts", "cleanup", "billing")


COUNTERS = """
    SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
           pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint,
           (SELECT coalesce(sum(total_plan_time + total_exec_time), 0) FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND query NOT LIKE '%%pg_snapshot_xmax%%'),
           (SELECT wal_fpi FROM pg_stat_wal),
           (SELECT active_time FROM pg_stat_database WHERE datname = current_database()),
           {own_wal}"""
# PostgreSQL 18 counts WAL per backend: the bench's own connection's, without autovacuum's and checkpoints'.
OWN_WAL = "(SELECT wal_bytes FROM pg_stat_get_backend_wal(pg_backend_pid()))::bigint"


def counters() -> tuple[int, int, float, int, float, int]:
    """(next transaction id, WAL insert position in bytes, statement ms, full-page images, active ms, WAL bytes
    this connection wrote (0 before PostgreSQL 18))."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(COUNTERS.format(own_wal=OWN_WAL if connection.pg_version >= 180000 else "0"))
        xid, wal, statements, fpi, active, own_wal = cursor.fetchone()
    return xid, wal, float(statements), fpi, float(active or 0.0), int(own_wal or 0)


def private_server():
    """A server of the bench's own with pg_stat_statements preloaded (a restart the shared one must not pay)."""
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.faults.private_server import PrivateServer

    import psycopg

    server = PrivateServer(Path(tempfile.mkdtemp(prefix="bench-cost-")))
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            conn.execute("ALTER SYSTEM SET autovacuum_naptime = '5s'")
            conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
        server.restart("fast")
    except BaseException:
        server.stop()  # a server nobody will use must not outlive the bench
        raise
    return server


def one_run(fake, index: int, measure) -> None:
    from scheduler.cleanup import billing_sweep, sandbox_sweep
    from scheduler.outbox import drainer
    from scheduler.runs import lifecycle, settlement

    request = lifecycle.LaunchRequest(play_name="cost:play", org_id=ORG, launch={"sandboxProvider": "daytona"},
                                      max_attempts=1)
    run_id = measure("launch", lambda: lifecycle.launch_run(request).run_id)
    claim = measure("claim", lambda: lifecycle.claim_queued_runs(1)[0])
    sandbox_id = f"cost-{index}"
    fake.add(sandbox_id, ORG)
    now_ms = int(time.time() * 1000)
    ref = {"provider": "daytona", "sandboxId": sandbox_id, "routingDomain": ORG}
    measure("park", lambda: lifecycle.park(run_id, claim.attempt, claim.lease_token, ref, heartbeat_timeout_ms=60_000,
                                           started_at_ms=now_ms, resource={**ref, "billingStartedAt": now_ms,
                                                                           "cpu": 1, "memoryMb": 1024}))
    measure("heartbeats x3", lambda: [lifecycle.heartbeat(run_id, claim.attempt, claim.lease_token) for _ in range(3)])
    result = {"status": "completed", "output": {"ok": True},
              "stats": {"runtimeResources": {"cpuMs": 1, "wallMs": 1, "peakMemoryBytes": 1}}}
    measure("settle", lambda: settlement.settle_attempts(
        [settlement.Settlement(run_id, claim.attempt, claim.lease_token, result, from_runner=True)]))
    delivered = measure("deliver 4 facts", lambda: drainer.run_once("cost-drainer").counts["delivered"])
    assert delivered == 4, delivered
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=10)
    measure("cleanup", lambda: (sandbox_sweep.run_once(["daytona"], "cost-cleaner"),
                                sandbox_sweep.run_once(["daytona"], "cost-cleaner", now=later)))
    billed = measure("billing", lambda: billing_sweep.run_once("cost-billing"))
    assert billed.counts["finalized"] == 1, billed.counts


def measured_runs(fake, runs: int, first: int) -> dict[str, list]:
    """Per phase, the summed (commits, WAL bytes, statement ms, full-page images, active ms, own WAL bytes) of
    `runs` runs."""
    totals = {phase: [0, 0, 0.0, 0, 0.0, 0] for phase in (*PHASES, "nothing")}

    def measure(phase, work):
        before = counters()
        value = work()
        after = counters()
        for slot in range(6):
            totals[phase][slot] += after[slot] - before[slot]
        return value

    for index in range(first, first + runs):
        one_run(fake, index, measure)
        # What a measurement costs by itself (its flush and snapshot reads), taken off every phase; measured
        # beside each run, so a checkpoint's full-page images fall on the runs and the floor alike.
        measure("nothing", lambda: None)
    empty = totals.pop("nothing")
    return {phase: [value - floor for value, floor in zip(totals[phase], empty)] for phase in PHASES}


def top_statements(limit: int = 10) -> list[tuple]:
    """The named blocks (or other statements) that took the most server time, for the table's foot."""
    from django.db import connection

    from scheduler import db, sql
    from scheduler.conf import scheduler_settings

    def words(text: str) -> list[str]:
        # pg_stat_statements keeps the text with its constants replaced by $n: compare with every constant blanked.
        text = " ".join(line.split("--")[0] for line in text.splitlines())
        return re.sub(r"'(?:[^']|'')*'|\$\d+|\b\d+\b", "?", text).split()

    blocks = {name: words(db._compiled(name, scheduler_settings.schema)[0]) for name in sql.raw_blocks()}

    def block_of(query: str) -> str:
        # The block sharing the longest run of leading words (constants the server folded differently aside).
        seen = words(query)
        best, length = max(((name, _common_prefix(seen, text)) for name, text in blocks.items()), key=lambda p: p[1])
        return best if length >= min(len(seen), 12) else " ".join(query.split())[:60]

    with connection.cursor() as cursor:
        cursor.execute("""SELECT query, calls, total_plan_time + total_exec_time, total_plan_time FROM pg_stat_statements
                           WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                             AND query NOT LIKE %s ORDER BY 3 DESC LIMIT %s""", ["%pg_snapshot_xmax%", limit])
        return [(block_of(query), calls, total, planning) for query, calls, total, planning in cursor]


def _common_prefix(left: list[str], right: list[str]) -> int:
    length = 0
    for a, b in zip(left, right):
        if a != b:
            break
        length += 1
    return length


def whole(totals: dict[str, list], slot: int, runs: int) -> float:
    return sum(total[slot] for total in totals.values()) / runs


def main():
    args = harness.arguments("50 runs instead of 300").parse_args()
    runs = 50 if args.quick else RUNS
    from django.conf import settings
    from django.db import connections

    from tests.providers.fake_daytona import FakeDaytona

    server = None if os.environ.get("DATABASE_URL") else private_server()
    try:
        with FakeDaytona({"key-cost": ORG}) as fake:
            os.environ.update(SCHEDULER_DAYTONA_API_URL=fake.url, LOG_LEVEL="WARNING",
                              SCHEDULER_DAYTONA_API_KEYS=json.dumps({ORG: "key-cost"}))
            harness.setup_django(harness.recreate_database(server.url if server else harness.server_url()))
            with connections["default"].cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            prepared = measured_runs(fake, runs, 0)
            settings.SCHEDULER_PREPARE_STATEMENTS = False
            connections.close_all()
            top = top_statements()
            unprepared = measured_runs(fake, runs, runs)
    finally:
        if server is not None:
            server.stop()
    rows = [("measure", "value", "reference", "ratio", "target")]
    for phase in PHASES:
        commits, wal, statements, fpi, active, _ = prepared[phase]
        rows.append((f"  {phase}: commits; WAL; statement time per run", f"{commits / runs:.1f}",
                     f"{wal / runs / 1024:.1f} KB ({fpi / runs:.2f} FPI); {statements / runs:.2f} ms", "", ""))
    wal_kb, statement_ms = whole(prepared, 1, runs) / 1024, whole(prepared, 2, runs)
    rows.append(("whole run: write transactions", f"{whole(prepared, 0, runs):.1f}", "", "", ""))
    own_kb = whole(prepared, 5, runs) / 1024
    rows.append(("whole run: WAL (KB)", f"{wal_kb:.1f}",
                 f"{own_kb:.1f} KB written by the run's own statements" if own_kb else "", f"{wal_kb:.1f}", "<= 16"))
    rows.append(("whole run: server time (ms, pg_stat_statements)", f"{statement_ms:.2f}",
                 f"{whole(prepared, 4, runs):.2f} ms active incl. commit flushes", f"{statement_ms:.2f}", "<= 2"))
    rows.append(("whole run, statements not prepared (a pooler < 1.21): server time (ms)",
                 f"{whole(unprepared, 2, runs):.2f}", f"{whole(unprepared, 2, runs) / statement_ms:.2f}x prepared",
                 "", ""))
    harness.print_table("where the server time of the prepared runs went",
                        [("statement", "calls", "ms per run", "of which planning")]
                        + [(name, calls, f"{total / runs:.3f}", f"{planning / runs:.3f}")
                           for name, calls, total, planning in top])
    harness.report(f"the database cost of one run ({runs} runs each way)", rows, args.check)


if __name__ == "__main__":
    main()
