"""Work receipt benchmark (RCP-1): single-key claim+complete at 8 clients against pgbench's one-row
claim-and-update limit at 8 clients in the same run, and the batch form with 100 keys per statement.

The single form is measured twice. The target row replays the two named statements (receipts_claim, then
receipts_complete with the lease id the claim returned) from 8 pgbench clients: what the statements cost the
server, against what the server can do. The row under it drives the same calls through the Python API from 8
threads of one process: on a 2-core machine that client competes with the server for the cores, so it says what
one Python process can push, not what the statements cost.

Run: ./dev bench receipts [--quick] [--check]   (by hand, never in CI)
"""

from __future__ import annotations


import harness
from lifecycle import run_workers, seed_parked

CLIENTS = 8
SINGLE_KEYS = 8_000
BATCH_KEYS = 80_000
BATCH = 100


def callers(prefix: str):
    """One parked run per client: eight plays, each recording its own steps."""
    from scheduler.runs import receipts

    return [receipts.Caller(run_id, 1, lease) for run_id, lease in seed_parked(CLIENTS, prefix)]


def bench_single(keys_per_client: int) -> float:
    """Each client claims one key, then completes it: two statements per step, as a play's step() does."""
    from scheduler.runs import receipts

    mine = callers("receipt-single-")

    def client(index):
        caller = mine[index]
        for number in range(keys_per_client):
            [claimed] = receipts.claim(caller, [f"step-{number}"])
            [done] = receipts.complete(caller, [receipts.Item(claimed.key, claimed.lease_id, {"n": number})],
                                       return_output=False)
            assert done.changed, done

    return CLIENTS * keys_per_client / run_workers(CLIENTS, client)


def bench_batch(keys_per_client: int) -> float:
    """Each client claims BATCH keys in one statement, then completes them in one: keys per second."""
    from scheduler.runs import receipts

    mine = callers("receipt-batch-")

    def client(index):
        caller = mine[index]
        for start in range(0, keys_per_client, BATCH):
            claimed = receipts.claim(caller, [f"step-{number}" for number in range(start, start + BATCH)])
            done = receipts.complete(caller, [receipts.Item(answer.key, answer.lease_id, {"n": 1})
                                              for answer in claimed], return_output=False)
            assert all(answer.changed for answer in done)

    return CLIENTS * keys_per_client / run_workers(CLIENTS, client)


def replay_single(seconds: int) -> float:
    """Claim then complete one key per pgbench transaction, each client on its own run: steps per second."""
    callers("receipt-replay-")
    values = {"run_id": "'receipt-replay-' || (:client_id % 8 + 1)", "attempt": "1",
              "lease_token": "'lease-' || (:client_id % 8 + 1)", "keys": "ARRAY['step-' || :n]", "lease_ms": "60000",
              "lease_ids": "ARRAY[:lease_id]::text[]", "outputs": "ARRAY['{\"n\": 1}']::jsonb[]",
              "return_output": "false"}
    script = ("\\set n random(1, 2000000000)\n" + harness.replay_statement("receipts_claim", values, gset=True)
              + harness.replay_statement("receipts_complete", values))
    return harness.pgbench_run(harness.with_database(harness.server_url(), harness.BENCH_DB), script, CLIENTS,
                               seconds, prepared=True)


def main():
    parser = harness.arguments("a tenth of the sizes, for a smoke run")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    server_url = harness.server_url()
    bench_url = harness.recreate_database(server_url)
    harness.setup_django(bench_url)
    from django.db import connections

    single = bench_single(SINGLE_KEYS // scale // CLIENTS)
    connections.close_all()
    batched = bench_batch(BATCH_KEYS // scale // CLIENTS)
    connections.close_all()
    replayed = replay_single(3 if args.quick else 10)
    limit = harness.pgbench_limit(bench_url, harness.CLAIM_AND_UPDATE, clients=CLIENTS)
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"single key claim+complete, {CLIENTS} pgbench clients (steps/s)", f"{replayed:.0f}",
             f"pgbench claim+update c={CLIENTS}: {limit:.0f} tps", f"{replayed / limit:.2f}", ">= 0.50"),
            (f"  the same through the Python API, {CLIENTS} threads", f"{single:.0f}", "", f"{single / limit:.2f}", ""),
            (f"batch of {BATCH} keys per statement, {CLIENTS} clients (keys/s)", f"{batched:.0f}",
             "the single form", f"{batched / single:.2f}", ">= 5.00")]
    harness.report(f"receipts benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
