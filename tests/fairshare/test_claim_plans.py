"""FSH-4's cost: the claim finds each org's next runs through the org queue index, never reading another org's
backlog; a skip scan finds the orgs (one probe each), and the counts use the partial indexes."""

import pytest

from tests.factories import query
from tests.support import generic_plan

pytestmark = pytest.mark.django_db


@pytest.fixture
def backlog():
    query("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
             SELECT 'flood-' || lpad(i::text, 6, '0'), 'org-a', 'play', 'queued', '{}', 1,
                    now() - interval '1 hour' + i * interval '1 ms'
             FROM generate_series(1, 20000) AS i;
             INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts)
             VALUES ('late', 'org-b', 'play', 'queued', '{}', 1);
             ANALYZE runs""")


def rows_read(plan: str) -> int:
    """The most rows any node of an analyzed plan produced from runs (a scan of the backlog shows as 20,000)."""
    import re

    return max(int(float(found)) for found in re.findall(r"on runs\b[^\n]*?\(actual\b[^)\n]*?\brows=([0-9.]+)", plan)
               or ["0"])


def test_choosing_the_orgs__one_probe_per_org__not_a_walk_of_the_backlog(backlog):
    plan = generic_plan("runs_claim_queued_free", {"limit": 32, "lease_seconds": 300, "default_max_active": None},
                        analyze=True)
    assert "Seq Scan on runs" not in plan, plan
    assert "runtime_scheduler_runs_org_queue_idx" in plan, plan
    assert rows_read(plan) <= 64, plan


def test_the_claim__walks_each_org_only_as_far_as_it_takes(backlog):
    plan = generic_plan("runs_claim_queued", {
        "limit": 32, "lease_seconds": 300, "orgs": ["org-a", "org-b"],
        "default_max_active": None, "take_turns": True, "now_pass": 0}, analyze=True)
    assert "Seq Scan on runs" not in plan, plan
    assert rows_read(plan) <= 64, plan


@pytest.mark.requirement("FSH-12")
def test_fsh12__a_counted_org_is_read_past_a_full_key_by_its_indexes__not_by_walking_the_key(backlog):
    """20,000 queued runs of one full key ahead: the claim of that org reads a few rows (a probe per key, the
    keyless runs in order), never the key's backlog."""
    query("""UPDATE runs SET concurrency_key = 'full', concurrency_limit = 1 WHERE org_id = 'org-a';
             INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, concurrency_key,
                               concurrency_limit)
             VALUES ('holder', 'org-a', 'play', 'running', '{}', 1, 'full', 1),
                    ('behind', 'org-a', 'play', 'queued', '{}', 1, NULL, NULL);
             ANALYZE runs""")
    plan = generic_plan("runs_claim_queued", {
        "limit": 8, "lease_seconds": 300, "orgs": ["org-a"],
        "default_max_active": None, "take_turns": False, "now_pass": 0}, analyze=True)
    assert "Seq Scan on runs" not in plan, plan
    assert rows_read(plan) <= 16, plan


@pytest.mark.requirement("FSH-1")
@pytest.mark.parametrize("block", ["runs_claim_queued_free", "runs_claim_queued"])
def test_fsh1__a_capped_org_is_counted_only_up_to_its_cap__by_an_index_scan(block):
    """2,000 runs holding slots of an org capped at 8: each claim statement counts 8 of them, walking the org
    holding index in order. An unbounded count was a bitmap scan, which visits a settled run's page on every
    claim until vacuum (an index scan marks its entry dead the first time)."""
    from scheduler.fairshare import limits

    query("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts)
             SELECT 'holding-' || lpad(i::text, 6, '0'), 'org-a', 'play', 'running', '{}', 1
             FROM generate_series(1, 2000) AS i ORDER BY random();
             INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts)
             VALUES ('next', 'org-a', 'play', 'queued', '{}', 1);
             ANALYZE runs""")
    limits.change("org-a", limits.LimitsChange(max_active=8), actor="test")
    plan = generic_plan(block, {"limit": 32, "lease_seconds": 300, "orgs": ["org-a"], "default_max_active": None,
                                "take_turns": True, "now_pass": 0}, analyze=True)
    assert "Bitmap Heap Scan on runs active" not in plan, plan
    assert "Index Scan using runtime_scheduler_runs_org_holding_idx on runs active" in plan, plan
    assert rows_read(plan) <= 8, plan
