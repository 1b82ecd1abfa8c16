"""FSH-1..3, FSH-6..8, FSH-11, FSH-12 fuzzed with Hypothesis: random orgs, weights, caps, keys, start rates, pauses
and not-before times; dispatchers claiming at once on their own connections; the invariants checked after every
round of claims (and a round's settlements): no cap, key limit or start rate exceeded, no paused or not-yet-due run
claimed, no claimable run passed over while a run after it in its org's order is taken; and backlogged orgs served
in proportion to their weights. The production claim throughout (lifecycle.claim_queued_runs)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.runs import settlement
from scheduler.runs.lifecycle import claim_queued_runs
from tests import factories
from tests.concurrency.threads import run_together
from tests.factories import query

pytestmark = pytest.mark.django_db(transaction=True)
FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

RUN = st.tuples(st.integers(-2, 2), st.sampled_from([None, None, "k1", "k2"]), st.sampled_from([False] * 5 + [True]))
ORG = st.fixed_dictionaries({
    "weight": st.integers(1, 4), "cap": st.none() | st.integers(0, 5), "rate": st.none() | st.integers(1, 8),
    "paused": st.sampled_from([False] * 5 + [True]), "key_limits": st.tuples(st.integers(1, 3), st.integers(1, 3)),
    "runs": st.lists(RUN, max_size=12)})
ROUND = st.tuples(st.integers(1, 3), st.integers(1, 8), st.integers(0, 3))  # dispatchers, batch, runs settled after


def _fresh():
    query("TRUNCATE runs, attempts, outbox, org_limits, org_claim_turns, org_starts, operator_actions, "
          "compute_billing_jobs_v2, sandbox_cleanup_jobs_v2 CASCADE")


def _seed(orgs: list[dict]) -> None:
    for index, org in enumerate(orgs):
        name = f"o{index}"
        query("INSERT INTO org_limits (org_id, max_active, max_starts_per_minute, paused, weight) "
              "VALUES (%s, %s, %s, %s, %s)", [name, org["cap"], org["rate"], org["paused"], org["weight"]])
        for place, (priority, key, later) in enumerate(org["runs"]):
            limit = None if key is None else org["key_limits"][int(key[1]) - 1]
            query("INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at, "
                  "priority, concurrency_key, concurrency_limit, run_after) "
                  "VALUES (%s, %s, 'play', 'queued', '{}', 1, now() - interval '1 hour' + %s * interval '1 ms', "
                  "%s, %s, %s, CASE WHEN %s THEN now() + interval '1 hour' END)",
                  [f"{name}-r{place:02d}", name, place, priority, key, limit, later])


def _violations(orgs: list[dict], claimed: list[str], sequential: bool) -> list[str]:
    problems = []
    for index, org in enumerate(orgs):
        name = f"o{index}"
        active = query("SELECT run_id, concurrency_key FROM runs WHERE org_id = %s AND status = 'running'", [name])
        starts = query("SELECT count(*) FROM attempts JOIN runs USING (run_id) WHERE runs.org_id = %s", [name])[0][0]
        if org["cap"] is not None and len(active) > org["cap"]:
            problems.append(f"{name}: {len(active)} active past its cap {org['cap']}")
        if org["rate"] is not None and starts > org["rate"]:
            problems.append(f"{name}: {starts} starts past its rate {org['rate']}")
        if org["paused"] and starts:
            problems.append(f"{name}: paused, yet {starts} claimed")
        for number, limit in enumerate(org["key_limits"], 1):
            held = sum(1 for _, key in active if key == f"k{number}")
            if held > limit:
                problems.append(f"{name}: key k{number} held by {held} past its limit {limit}")
    if query("SELECT count(*) FROM runs WHERE status <> 'queued' AND run_after > now()")[0][0]:
        problems.append("a run claimed before its runAfter")
    if sequential:
        problems += _passed_over(orgs, claimed)
    return problems


def _passed_over(orgs: list[dict], claimed: list[str]) -> list[str]:
    """FSH-3, FSH-12: a run taken while a run of its org before it in the org's order was claimable (and is still
    queued and claimable now: counts only grew during the round)."""
    problems = []
    for run_id in claimed:
        org_id, priority, created = query("SELECT org_id, priority, created_at FROM runs WHERE run_id = %s",
                                          [run_id])[0]
        org = orgs[int(org_id[1:])]
        active = query("SELECT count(*) FROM runs WHERE org_id = %s AND status = 'running'", [org_id])[0][0]
        starts = query("SELECT count(*) FROM attempts JOIN runs USING (run_id) WHERE runs.org_id = %s", [org_id])[0][0]
        if (org["cap"] is not None and active >= org["cap"]) or (org["rate"] is not None and starts >= org["rate"]):
            continue
        for before, key, limit in query(
                "SELECT run_id, concurrency_key, concurrency_limit FROM runs WHERE org_id = %s AND status = 'queued' "
                "AND run_after IS NULL AND (priority > %s OR (priority = %s AND created_at < %s))",
                [org_id, priority, priority, created]):
            held = query("SELECT count(*) FROM runs WHERE org_id = %s AND concurrency_key = %s AND status = 'running'",
                         [org_id, key])[0][0] if key else 0
            if key is None or held < limit:
                problems.append(f"{run_id} taken while {before} before it was claimable")
    return problems


def _settle(count: int) -> None:
    for run_id, attempt, lease in query(
            "SELECT a.run_id, a.attempt, a.lease_token FROM attempts AS a JOIN runs AS r USING (run_id) "
            "WHERE r.status = 'running' AND a.status = 'claimed' ORDER BY a.run_id LIMIT %s", [count]):
        settlement.settle_attempt(run_id, attempt, lease, factories.completed_result())


@FUZZ
@given(orgs=st.lists(ORG, min_size=1, max_size=4), rounds=st.lists(ROUND, min_size=1, max_size=5))
def test_fuzzed_claims_keep_every_limit_and_pass_over_nothing_claimable(orgs, rounds):
    _fresh()
    _seed(orgs)
    for dispatchers, batch, settled in rounds:
        outcomes = run_together(*[lambda: [claim.run_id for claim in claim_queued_runs(batch)]] * dispatchers)
        claimed = [run_id for outcome in outcomes for run_id in outcome.get()]
        assert len(claimed) == len(set(claimed)), "a run claimed twice"
        problems = _violations(orgs, claimed, sequential=dispatchers == 1)
        assert problems == [], (problems, orgs, rounds)
        _settle(settled)


@pytest.mark.requirement("FSH-11")
@FUZZ
@given(weights=st.lists(st.integers(1, 5), min_size=2, max_size=4), batch=st.integers(1, 8))
def test_fuzzed_weights__backlogged_orgs_share_the_claims_by_weight(weights, batch):
    """FSH-11: over 6 claims, while every org stays backlogged, each org's claims are its weight's share of the
    total to within one batch and one run."""
    _fresh()
    _seed([{"weight": weight, "cap": None, "rate": None, "paused": False, "key_limits": (1, 1),
            "runs": [(0, None, False)] * 60} for weight in weights])
    taken = [0] * len(weights)
    for _ in range(6):
        for claim in claim_queued_runs(batch):
            taken[int(claim.org_id[1:])] += 1
    total = sum(taken)
    for index, weight in enumerate(weights):
        assert abs(taken[index] - total * weight / sum(weights)) <= batch + 1, (weights, batch, taken)
