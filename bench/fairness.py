"""Fair share at the claim (issue 35, FSH-1..4): one org's backlog does not delay another, the claim's cost
does not grow with a backlog, a cap holds under eight concurrent dispatchers, many orgs are served in turn,
and limit rows cost the single-tenant cycle nothing. Run: ./dev bench fairness [--quick] [--check]
"""

from __future__ import annotations

import statistics
import threading
import time

import fairness_shares
import harness
import lifecycle as lifecycle_bench

BATCH = 32


def seed(org: str, count: int, prefix: str, *, start_offset: str = "1 hour") -> None:
    """`count` queued runs of `org`, oldest first, written in bulk (with their run.created facts)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
            SELECT %(prefix)s || lpad(i::text, 8, '0'), %(org)s, 'bench', 'queued', '{}'::jsonb, 1,
                   now() - %(offset)s::interval + i * interval '1 microsecond'
            FROM generate_series(1, %(count)s) AS i;
            ANALYZE runs;
            """, {"prefix": prefix, "org": org, "count": count, "offset": start_offset})


def timed_claim() -> float:
    """One claim of BATCH runs from a vacuumed queue (its two statements and commit), in ms."""
    from django.db import connection
    from scheduler.runs import lifecycle

    with connection.cursor() as cursor:
        # Each sample starts with the queue index free of the runs earlier samples claimed, as autovacuum keeps
        # it in a running system; both cases are measured alike.
        cursor.execute("VACUUM runs")
    started = time.perf_counter()
    claims = lifecycle.claim_queued_runs(BATCH)
    elapsed = (time.perf_counter() - started) * 1000
    assert len(claims) == BATCH, len(claims)
    return elapsed


def alone(repeats: int, prefix: str) -> list[float]:
    """Claims from a queue that holds only what each takes."""
    samples = []
    for index in range(repeats):
        seed("org-a", BATCH, f"{prefix}{index}-")
        samples.append(timed_claim())
    return samples


def backlog_and_cost(backlog: int, repeats: int, bench_url: str) -> tuple[int, float, float]:
    """B's one run behind A's backlog: the claim batch that takes it; then the claim's cost beside the backlog,
    against the same claims on a queue that holds only what they take (measured before and after, medians)."""
    from scheduler.runs import lifecycle

    harness.quiesce(bench_url)
    empty = alone(repeats, "before-")
    seed("org-a", backlog, "flood-")
    seed("org-b", 1, "late-", start_offset="0 seconds")
    batches = 0
    while True:
        batches += 1
        if any(claim.org_id == "org-b" for claim in lifecycle.claim_queued_runs(BATCH)):
            break
        assert batches < 100, "org-b's run was never claimed"
    harness.quiesce(bench_url)
    with_backlog = [timed_claim() for _ in range(repeats)]
    return batches, statistics.median(with_backlog), statistics.median(empty)


def capped_under_eight(cap: int, runs: int) -> tuple[int, int]:
    """Eight dispatchers claim org A (capped) and settle each claim at once; the most active runs of A ever
    seen: by a sampler every 2 ms, and by each dispatcher right after each of its claims committed."""
    from django.db import connection, connections
    from scheduler.fairshare import limits
    from scheduler.runs import lifecycle, settlement

    limits.change("org-cap", limits.LimitsChange(max_active=cap), actor="bench")
    seed("org-cap", runs, "capped-")
    count_sql = "SELECT count(*) FROM runs WHERE org_id = 'org-cap' AND status IN ('running', 'waiting')"
    seen = [0]
    done = threading.Event()

    def observe():
        with connection.cursor() as cursor:
            cursor.execute(count_sql)
            seen[0] = max(seen[0], cursor.fetchone()[0])

    def sampler():
        try:
            while not done.is_set():
                observe()
                time.sleep(0.002)
        finally:
            connections.close_all()

    def dispatcher(index):
        held = []  # each dispatcher keeps up to 8 runs active before settling the oldest: 64 wanted, 50 allowed
        while True:
            claims = lifecycle.claim_queued_runs(8)
            observe()
            held.extend(claims)
            keep = 8 if claims else 0  # with nothing left to claim, settle everything held
            if len(held) > keep:
                done_now, held[:] = held[:len(held) - keep], held[len(held) - keep:]
                settlement.settle_attempts([settlement.Settlement(claim.run_id, claim.attempt, claim.lease_token,
                                                                  lifecycle_bench.RESULT) for claim in done_now])
            if not claims and not held:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1 FROM runs WHERE org_id = 'org-cap' AND status <> 'completed' LIMIT 1")
                    if cursor.fetchone() is None:
                        return
                time.sleep(0.001)

    watcher = threading.Thread(target=sampler)
    watcher.start()
    try:
        lifecycle_bench.run_workers(8, dispatcher)
    finally:
        done.set()
        watcher.join()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs WHERE org_id = 'org-cap' AND status = 'completed'")
        completed = cursor.fetchone()[0]
    assert completed == runs, completed
    return seen[0], completed


def many_orgs(orgs: int, per_org: int) -> tuple[int, int]:
    """Every org's runs queued org after org; claims of BATCH until some org's tenth run is claimed. Returns the
    claim that took the last first run and the claim that took the first tenth run."""
    from django.db import connection
    from scheduler.runs import lifecycle

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
            SELECT 'org' || lpad(o::text, 5, '0') || '-' || lpad(i::text, 4, '0'), 'many-' || lpad(o::text, 5, '0'),
                   'bench', 'queued', '{}'::jsonb, 1, now() - interval '1 day' + (o * %(per)s + i) * interval '1 ms'
            FROM generate_series(1, %(orgs)s) AS o, generate_series(1, %(per)s) AS i;
            ANALYZE runs;
            """, {"orgs": orgs, "per": per_org})
    last_first = first_tenth = None
    claim_number = 0
    while first_tenth is None:
        claim_number += 1
        for claim in lifecycle.claim_queued_runs(BATCH):
            place = int(claim.run_id.rsplit("-", 1)[1])
            if place == 1:
                last_first = claim_number
            if place == 10 and first_tenth is None:
                first_tenth = claim_number
        assert claim_number < orgs * per_org, "no tenth run was ever claimed"
    return last_first, first_tenth


def cycle_with_and_without_limit_rows(count: int, repetitions: int = 3) -> tuple[float, float, list, list]:
    """lifecycle's claim->settle cycle, interleaved: without org_limits rows, then with an unlimited row for the
    org (and 1,000 others), medians of `repetitions` each."""
    from django.db import connection, connections

    lifecycle_bench.bench_full_cycle(max(200, count // 4), "warm-")
    connections.close_all()
    without, with_rows = [], []
    for round_number in range(repetitions):
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM org_limits")
        without.append(lifecycle_bench.bench_full_cycle(count, f"plain-{round_number}-"))
        connections.close_all()
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO org_limits (org_id) SELECT 'org' UNION ALL "
                           "SELECT 'tenant-' || i FROM generate_series(1, 1000) AS i")
        with_rows.append(lifecycle_bench.bench_full_cycle(count, f"limited-{round_number}-"))
        connections.close_all()
    return statistics.median(without), statistics.median(with_rows), without, with_rows


def main():
    parser = harness.arguments("smaller backlogs and fewer orgs, for a smoke run")
    args = parser.parse_args()
    backlog, orgs, cycle_runs = (10_000, 200, 2_000) if args.quick else (100_000, 1_000, 10_000)
    bench_url = harness.recreate_database(harness.server_url())
    harness.setup_django(bench_url)
    from django.db import connection, connections

    def fresh():
        connections.close_all()
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE runs, attempts, outbox, org_limits, org_claim_turns, org_starts, "
                           "compute_billing_jobs_v2, operator_actions CASCADE")

    batches, with_backlog, empty = backlog_and_cost(backlog, 30 if args.quick else 60, bench_url)
    fresh()
    highest, completed = capped_under_eight(50, 2_000 if args.quick else 10_000)
    fresh()
    last_first, first_tenth = many_orgs(orgs, 100)
    fresh()
    plain, limited, plain_runs, limited_runs = cycle_with_and_without_limit_rows(cycle_runs)
    fresh()
    spread_share, spread_runs = fairness_shares.spread_over_keys()
    fresh()
    heavy_share, heavy_runs = fairness_shares.weights_one_to_three()
    fresh()
    capped_share, capped_runs = fairness_shares.capped_beside_unlimited()
    fresh()
    ahead = 10_000 if args.quick else 100_000
    reached = fairness_shares.behind_a_full_key(ahead)
    rows = [("measure", "value", "reference", "ratio", "target"),
            (f"org B's run behind {backlog:,} of org A: the claim batch that takes it", f"{batches}",
             f"batches of {BATCH}", f"{batches}", "<= 1"),
            (f"claim of {BATCH} beside {backlog:,} queued (ms per claim)", f"{with_backlog:.2f}",
             f"queue holding only the batch: {empty:.2f} ms", f"{with_backlog / empty:.2f}", "<= 1.20"),
            ("  the same per run (ms)", f"{with_backlog / BATCH:.3f}", f"{empty / BATCH:.3f} ms", "", ""),
            (f"org capped at 50, 8 dispatchers, {completed:,} runs: most active ever seen", f"{highest}",
             "the cap: 50", f"{highest}", "<= 50"),
            (f"{orgs:,} orgs x 100 queued: claim taking the last first run / the first tenth run",
             f"{last_first} / {first_tenth}", "every first before any tenth", f"{last_first / first_tenth:.2f}",
             "<= 0.99"),
            ("claim->settle cycle, 8 workers, org_limits rows for every org (runs/s)", f"{limited:.0f}",
             f"without limit rows: {plain:.0f} runs/s", f"{limited / plain:.2f}", ">= 0.90"),
            ("  each repetition (without / with rows, runs/s)",
             " ".join(f"{a:.0f}/{b:.0f}" for a, b in zip(plain_runs, limited_runs)), "", "", ""),
            (f"(a) 10,000 runs over 1,000 keys beside 100 under one key: the one key's share ({spread_runs} claimed)",
             f"{spread_share:.3f}", "half: 0.500", f"{abs(spread_share - 0.5) / 0.5:.2f} off", "<= 0.10"),
            (f"(b) weights 1:3, {heavy_runs} claimed: the weight-3 org's share", f"{heavy_share:.3f}", "0.750",
             f"{abs(heavy_share - 0.75) / 0.75:.2f} off", "<= 0.10"),
            (f"(c) capped at 1,000 beside 12 unlimited orgs, {capped_runs} claimed: its share", f"{capped_share:.4f}",
             f"1/13: {1 / 13:.4f}", f"{abs(capped_share - 1 / 13) * 13:.2f} off", "<= 0.10"),
            (f"(d) a run behind {ahead:,} runs of a full key: claimed by the first claim", "yes" if reached else "no",
             "", "1" if reached else "0", ">= 1")]
    harness.report(f"fair share benchmark ({'quick' if args.quick else 'full'})", rows, args.check)


if __name__ == "__main__":
    main()
