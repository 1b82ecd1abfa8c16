"""The database cost of one whole run, phase by phase: write transactions (commits that flush WAL), WAL bytes
and server time (pg_stat_database.active_time) for launch, claim, park, three heartbeats, settle, the delivery
of its four facts, cleanup (a fake Daytona accepts the delete) and billing.

Every phase runs on this process's one connection, so the server-side counters are this work's alone
(pg_stat_force_next_flush makes active_time current). Targets: at most 2 ms of server time and 16 KB of WAL
per run.

Run: ./dev bench cost [--quick] [--check]   (by hand, never in CI)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import harness

RUNS = 300
ORG = "org-cost"
PHASES = ("launch", "claim", "park", "heartbeats x3", "settle", "deliver 4 facts", "cleanup", "billing")


def counters() -> tuple[int, int, float]:
    """(next transaction id, WAL insert position in bytes, active ms of this database)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("""
            SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,
                   pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint,
                   (SELECT active_time FROM pg_stat_database WHERE datname = current_database())""")
        xid, wal, active = cursor.fetchone()
    return xid, wal, float(active or 0.0)


def one_run(fake, index: int, measure) -> None:
    from scheduler.cleanup import billing_sweep, sandbox_sweep
    from scheduler.outbox import drainer
    from scheduler.runs import lifecycle, settlement

    request = lifecycle.LaunchRequest(play_name="cost:play", org_id=ORG, launch={"sandboxProvider": "daytona"},
                                      max_attempts=1)
    run_id = measure("launch", lambda: lifecycle.launch_run(request))
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


def main():
    args = harness.arguments("50 runs instead of 300").parse_args()
    runs = 50 if args.quick else RUNS
    from tests.providers.fake_daytona import FakeDaytona

    with FakeDaytona({"key-cost": ORG}) as fake:
        os.environ.update(SCHEDULER_DAYTONA_API_URL=fake.url, SCHEDULER_DAYTONA_API_KEYS=json.dumps({ORG: "key-cost"}),
                          LOG_LEVEL="WARNING")
        harness.setup_django(harness.recreate_database(harness.server_url()))
        totals = {phase: [0, 0, 0.0] for phase in PHASES}

        def measure(phase, work):
            before = counters()
            value = work()
            after = counters()
            for slot in range(3):
                totals[phase][slot] += after[slot] - before[slot]
            return value

        for index in range(runs):
            one_run(fake, index, measure)
        # What a measurement costs by itself (its flush and snapshot reads), taken off every phase.
        totals["nothing"] = [0, 0, 0.0]
        for _ in range(runs):
            measure("nothing", lambda: None)
    empty = totals.pop("nothing")
    for phase in PHASES:
        totals[phase] = [value - floor for value, floor in zip(totals[phase], empty)]
    rows = [("measure", "value", "reference", "ratio", "target")]
    for phase in PHASES:
        commits, wal, active = totals[phase]
        rows.append((f"  {phase}: commits, WAL, server time per run", f"{commits / runs:.1f}",
                     f"{wal / runs / 1024:.1f} KB, {active / runs:.2f} ms", "", ""))
    commits = sum(total[0] for total in totals.values()) / runs
    wal_kb = sum(total[1] for total in totals.values()) / runs / 1024
    active_ms = sum(total[2] for total in totals.values()) / runs
    rows.append(("whole run: write transactions", f"{commits:.1f}", "", "", ""))
    rows.append(("whole run: WAL (KB)", f"{wal_kb:.1f}", "", f"{wal_kb:.1f}", "<= 16"))
    rows.append(("whole run: server time (ms)", f"{active_ms:.2f}", "", f"{active_ms:.2f}", "<= 2"))
    harness.report(f"the database cost of one run ({runs} runs)", rows, args.check)


if __name__ == "__main__":
    main()
