"""Fair share's shares (FSH-4, FSH-11, FSH-12) for ./dev bench fairness: what each backlogged org gets of the
claims, and how far back a claimable run may sit. Each function seeds its own queue and returns its figures."""

from __future__ import annotations

BATCH = 32


def _seed(sql: str, **params) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql + "; ANALYZE runs", params)


def _queued(org: str, count: int, prefix: str, *, key_sql: str = "NULL", limit_sql: str = "NULL") -> None:
    _seed(f"""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at,
                                concurrency_key, concurrency_limit)
              SELECT %(prefix)s || lpad(i::text, 8, '0'), %(org)s, 'bench', 'queued', '{{}}'::jsonb, 1,
                     now() - interval '1 hour' + i * interval '1 microsecond', {key_sql}, {limit_sql}
              FROM generate_series(1, %(count)s) AS i""", prefix=prefix, org=org, count=count)


def _share_while_backlogged(org: str, others: set[str], batch: int, claims: int | None = None) -> tuple[float, int]:
    """`org`'s share of the runs claimed while it and every org of `others` still had a batch queued (or over
    `claims` claims), and how many runs that was."""
    from django.db import connection
    from scheduler.runs import lifecycle

    taken = {name: 0 for name in others | {org}}
    made = 0
    while claims is None or made < claims:
        with connection.cursor() as cursor:  # every org still holds a batch: its share is not cut by running out
            cursor.execute("SELECT count(*) FROM (SELECT org_id FROM runs WHERE status = 'queued' AND org_id = ANY(%s) "
                           "GROUP BY org_id HAVING count(*) >= %s) AS backlogged", [list(taken), batch])
            if cursor.fetchone()[0] < len(taken):
                break
        got = lifecycle.claim_queued_runs(batch)
        assert got, "a claim took nothing while every org was backlogged"
        for claim in got:
            taken[claim.org_id] += 1
        made += 1
    total = sum(taken.values())
    return taken[org] / total, total


def spread_over_keys() -> tuple[float, int]:
    """(a) Trigger.dev's case: org A spreads 10,000 runs over 1,000 keys, org B has 100 runs under one key; equal
    weights. B's share of the claims while both are backlogged."""
    _queued("spread-a", 10_000, "spread-a-", key_sql="'key-' || (i %% 1000)", limit_sql="10")
    _queued("single-b", 100, "single-b-", key_sql="'one'", limit_sql="100")
    return _share_while_backlogged("single-b", {"spread-a"}, BATCH)


def weights_one_to_three() -> tuple[float, int]:
    """(b) weights 1:3 over 1,000 claimed runs: the heavier org's share."""
    from scheduler.fairshare import limits

    limits.change("heavy", limits.LimitsChange(weight=3), actor="bench")
    _queued("light", 2_000, "light-")
    _queued("heavy", 2_000, "heavy-")
    return _share_while_backlogged("heavy", {"light"}, 8, claims=125)


def capped_beside_unlimited() -> tuple[float, int]:
    """(c) an org capped at 1,000 beside 12 orgs without limits: its share of the claims."""
    from scheduler.fairshare import limits

    limits.change("capped", limits.LimitsChange(max_active=1_000), actor="bench")
    _queued("capped", 1_000, "capped-")
    others = {f"free-{index:02d}" for index in range(12)}
    for org in others:
        _queued(org, 1_000, f"{org}-")
    return _share_while_backlogged("capped", others, BATCH, claims=300)


def behind_a_full_key(ahead: int) -> bool:
    """(d) a run behind `ahead` queued runs of a full key: whether the first claim after it is due takes it."""
    from django.db import connection
    from scheduler.runs import lifecycle

    _seed("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, concurrency_key,
                               concurrency_limit)
             VALUES ('holder', 'keyed', 'bench', 'running', '{}'::jsonb, 1, 'full', 1)""")
    _queued("keyed", ahead, "ahead-", key_sql="'full'", limit_sql="1")
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts) "
                       "VALUES ('behind', 'keyed', 'bench', 'queued', '{}'::jsonb, 1)")
    return "behind" in {claim.run_id for claim in lifecycle.claim_queued_runs(BATCH)}
