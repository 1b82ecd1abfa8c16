"""The database cost of one whole run, phase by phase: write transactions (commits that flush WAL), WAL bytes
(and how many were full-page images) and server time for launch, claim, park, three heartbeats, settle, the
delivery of its four facts, cleanup (a fake Daytona accepts the delete) and billing; then the same runs with
SCHEDULER_PREPARE_STATEMENTS=false (what a transaction-pooling PgBouncer older than 1.21 costs).

Server time is pg_stat_statements' planning plus execution time of every statement: on the embedded server the
bench starts a private one with the extension preloaded (a commit's wait for its WAL flush is the disk's, not
the statements'; pg_stat_database.active_time, which counts it, is shown beside). Every phase runs on this
process's one connection, so the statement counters are this work's alone; the WAL position is the server's,
so autovacuum's and checkpoints' WAL during a phase counts too (on PostgreSQL 18 the WAL this connection wrote is
shown beside it). Targets: at most 2 ms of server time and 16 KB of WAL per run. Beside them, the floor under
this schema (cost_floor.py): the same runs' rows written by plain statements in the same transactions.

Run: ./dev bench cost [--quick] [--check]   (by hand, never in CI)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time

import cost_floor
import harness
import statement_names
from cost_wal import index_entries, wal_by_kind, wal_by_table, wal_position

RUNS = 300
ORG = "org-cost"
PHASES = ("launch", "claim", "park", "heartbeats x3", "settle", "deliver 4 facts", "cleanup", "billing")


COUNTERS = """
    SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
           pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint,
           (SELECT coalesce(sum(total_plan_time + total_exec_time), 0) FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               -- Not the bench's own reads: this one, and the flush before it (one in every phase's window).
               AND query NOT LIKE '%%pg_snapshot_xmax%%' AND query NOT LIKE '%%pg_stat_force_next_flush%%'),
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
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.faults.private_server import PrivateServer

    import psycopg

    server = PrivateServer.in_temporary_directory("bench-cost-")
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
            conn.execute("ALTER SYSTEM SET autovacuum_naptime = '5s'")
            conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
        server.restart("fast")
    except BaseException:
        server.discard()  # a server nobody will use must not outlive the bench
        raise
    return server


def one_run(fake, index: int, measure, receiver: dict) -> str:
    from scheduler.cleanup import billing_sweep, sandbox_sweep
    from scheduler.outbox import drainer
    from scheduler.runs import beats, lifecycle, settlement

    request = lifecycle.LaunchRequest(play_name="cost:play", org_id=ORG,
                                      launch={"sandboxProvider": "daytona", **receiver}, max_attempts=1)
    run_id = measure("launch", lambda: lifecycle.launch_run(request).run_id)
    claim = measure("claim", lambda: lifecycle.claim_queued_runs(1)[0])
    sandbox_id = f"cost-{index}"
    fake.add(sandbox_id, ORG)
    now_ms = int(time.time() * 1000)
    ref = {"provider": "daytona", "sandboxId": sandbox_id, "routingDomain": ORG}
    measure("park", lambda: lifecycle.park(run_id, claim.attempt, claim.lease_token, ref, heartbeat_timeout_ms=60_000,
                                           started_at_ms=now_ms, resource={**ref, "billingStartedAt": now_ms,
                                                                           "cpu": 1, "memoryMb": 1024}))
    measure("heartbeats x3", lambda: [beats.heartbeat(run_id, claim.attempt, claim.lease_token) for _ in range(3)])
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
    return run_id


def measured_runs(fake, runs: int, first: int, receiver: dict, run_ids: list | None = None) -> dict[str, list]:
    """Per phase, the summed (commits, WAL bytes, statement ms, full-page images, active ms, own WAL bytes) of
    `runs` runs delivering to `receiver` (the launch's receiver keys; empty: the built-in one)."""
    totals = {phase: [0, 0, 0.0, 0, 0.0, 0] for phase in (*PHASES, "nothing")}

    def measure(phase, work):
        before = counters()
        value = work()
        after = counters()
        for slot in range(6):
            totals[phase][slot] += after[slot] - before[slot]
        return value

    for index in range(first, first + runs):
        run_id = one_run(fake, index, measure, receiver)
        if run_ids is not None:
            run_ids.append(run_id)
        # What a measurement costs by itself (its flush and snapshot reads), taken off every phase; measured
        # beside each run, so a checkpoint's full-page images fall on the runs and the floor alike.
        measure("nothing", lambda: None)
    empty = totals.pop("nothing")
    return {phase: [value - floor for value, floor in zip(totals[phase], empty)] for phase in PHASES}


def top_statements(limit: int = 10) -> list[tuple]:
    """The named blocks (or other statements) that took the most server time, for the table's foot."""
    from django.db import connection

    block_of = statement_names.namer()
    with connection.cursor() as cursor:
        cursor.execute("""SELECT query, calls, total_plan_time + total_exec_time, total_plan_time FROM pg_stat_statements
                           WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                             AND query NOT LIKE %s AND query NOT LIKE %s ORDER BY 3 DESC LIMIT %s""",
                       ["%pg_snapshot_xmax%", "%pg_stat_force_next_flush%", limit])
        return [(block_of(query), calls, total, planning) for query, calls, total, planning in cursor]


# What each row a finished run keeps is for; none can go before the run's retention ends (RET-1).
KEPT_ROWS = {
    "runs": "the run: status, launch, input and result (the status read, get_result, the admin)",
    "attempts": "the attempt's lease and its one verdict (the fence every later write checks)",
    "outbox": "each fact, delivered or not: the order and the dedup key of what the ledger received",
    "run_ledger_events": "the built-in receiver's copy of each fact (none when the ledger is external)",
    "sandbox_cleanup_jobs_v2": "the tombstone: proof the provider accepted the sandbox's delete",
    "sandbox_cleanup_events_v2": "the append-only record of the delete (accepted, confirmed)",
    "compute_billing_jobs_v2": "billing's state for the run, finalized once",
    "billing_items": "the invoice line, kept on billing's own clock (RET-2)",
}


def kept_rows(run_ids: list[str]) -> list[tuple]:
    """Per table, the rows one run keeps and their average size (row data, without index entries)."""
    from django.db import connection

    rows, data = [], 0.0
    with connection.cursor() as cursor:
        for table, why in KEPT_ROWS.items():
            cursor.execute(f"SELECT count(*), coalesce(avg(pg_column_size(kept.*)), 0) FROM {table} AS kept "
                           "WHERE kept.run_id = ANY (%s)", [run_ids])
            count, size = cursor.fetchone()
            rows.append((table, f"{count / len(run_ids):.1f}", f"{float(size):.0f} B", why))
            data += count * float(size) / len(run_ids)
    rows.append(("all of them", "", f"{data / 1024:.1f} KB a run",
                 "the rest of a run's WAL: index entries, each update's new row version, commit records"))
    return rows


def whole(totals: dict[str, list], slot: int, runs: int) -> float:
    return sum(total[slot] for total in totals.values()) / runs


def phase_rows(totals: dict[str, list], runs: int) -> list[tuple]:
    rows = []
    for phase in PHASES:
        commits, wal, statements, fpi, _, _ = totals[phase]
        rows.append((f"  {phase}: commits; WAL; statement time per run", f"{commits / runs:.1f}",
                     f"{wal / runs / 1024:.1f} KB ({fpi / runs:.2f} FPI); {statements / runs:.2f} ms", "", ""))
    return rows


def floor_rows(floor: dict[str, list], production: dict[str, list], runs: int) -> list[tuple]:
    rows, sums = [], [0.0] * 4
    for phase in PHASES:
        commits, wal, statements, _ = floor[phase]
        figures = (wal / runs / 1024, production[phase][1] / runs / 1024, statements / runs, production[phase][2] / runs)
        sums = [total + figure for total, figure in zip(sums, figures)]
        rows.append((phase, f"{commits / runs:.0f}", *(f"{figure:.2f}" for figure in figures)))
    own = sum(floor[phase][3] for phase in PHASES) / runs / 1024
    rows.append(("whole run", f"{sum(floor[phase][0] for phase in PHASES) / runs:.0f}",
                 *(f"{total:.2f}" for total in sums)))
    if own:
        rows.append(("  of which its own statements' WAL", "", f"{own:.2f}",
                     f"{whole(production, 5, runs) / 1024:.2f}", "", ""))
    return rows


def main():
    args = harness.arguments("50 runs instead of 300").parse_args()
    runs = 50 if args.quick else RUNS
    from django.conf import settings
    from django.db import connections

    from tests.outbox.fake_receiver import COORDINATOR_TOKEN, FakeReceiver
    from tests.providers.fake_daytona import FakeDaytona

    server = None if os.environ.get("DATABASE_URL") else private_server()
    receiver, run_ids = FakeReceiver(), []
    # The production path: each launch names its run ledger's API, and the drainer delivers there over HTTP.
    external = {"runtimeApiBaseUrl": receiver.url, "coordinatorInternalToken": COORDINATOR_TOKEN}
    try:
        with FakeDaytona({"key-cost": ORG}, gone_after_seconds=0.0) as fake:
            os.environ.update(SCHEDULER_DAYTONA_API_URL=fake.url, LOG_LEVEL="WARNING",
                              SCHEDULER_DAYTONA_API_KEYS=json.dumps({ORG: "key-cost"}))
            harness.setup_django(harness.recreate_database(server.url if server else harness.server_url()))
            with connections["default"].cursor() as cursor:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")  # cost_wal's readers
            built_in = measured_runs(fake, runs, 0, {})
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT pg_stat_statements_reset()")  # the foot's table: the external path's
            wal_start = wal_position()
            prepared = measured_runs(fake, runs, runs, external, run_ids)
            wal_end = wal_position()
            top = top_statements(20)  # before the WAL's readers, whose own statements are no run's
            by_table, by_kind = wal_by_table(wal_start, wal_end, runs), wal_by_kind(wal_start, wal_end, runs)
            entries = index_entries(wal_start, wal_end, runs)
            kept = kept_rows(run_ids)
            with connections["default"].cursor() as cursor:
                sources = cost_floor.run_rows(cursor, run_ids)
            floor = cost_floor.measure(harness.conninfo(os.environ["DATABASE_URL"]), sources, runs)
            settings.SCHEDULER_PREPARE_STATEMENTS = False
            connections.close_all()
            unprepared = measured_runs(fake, runs, 2 * runs, external)
    finally:
        receiver.close()
        if server is not None:
            server.discard()
    rows = [("measure", "value", "reference", "ratio", "target"), ("external ledger on loopback (the production path)", "", "", "", "")]
    rows += phase_rows(prepared, runs)
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
    rows.append(("built-in receiver (a second copy of every fact in this database)", "", "", "", ""))
    rows += phase_rows(built_in, runs)
    rows.append(("whole run: WAL (KB); server time (ms)", f"{whole(built_in, 1, runs) / 1024:.1f}",
                 f"{whole(built_in, 2, runs):.2f} ms; {whole(built_in, 0, runs):.1f} write transactions", "", ""))
    harness.print_table("where the server time of the external path's runs went",
                        [("statement", "calls", "ms per run", "of which planning")]
                        + [(name, calls, f"{total / runs:.3f}", f"{planning / runs:.3f}")
                           for name, calls, total, planning in top])
    harness.print_table("the WAL of the external path's runs, table by table (its indexes and TOAST with it)",
                        [("table", "KB a run", "of which full-page images")] + by_table)
    harness.print_table("the WAL of the external path's runs, kind by kind of record (a kind's KB include its headers)",
                        [("record", "records a run", "KB a run", "what writes it")] + by_kind)
    harness.print_table("the index entries of the external path's runs, index by index",
                        [("index", "entries a run", "its predicate (a row version enters a partial index it matches)")]
                        + entries)
    harness.print_table("the rows a finished run keeps (external path) and why each is required",
                        [("table", "rows a run", "average size", "why")] + kept)
    harness.print_table("the floor: the same rows written by plain statements in the same transactions (no read, "
                        "no fence; bench/cost_floor.py), against the production's",
                        [("phase", "commits", "WAL KB", "production's", "statement ms", "production's")]
                        + floor_rows(floor, prepared, runs))
    harness.report(f"the database cost of one run ({runs} runs each way)", rows, args.check)


if __name__ == "__main__":
    main()
