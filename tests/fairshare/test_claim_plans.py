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

    return max(int(float(found)) for found in re.findall(r"on runs\b.*?actual rows=([0-9.]+)", plan, re.S) or ["0"])


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
