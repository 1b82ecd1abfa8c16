"""FSH-1..4, FSH-6..8: the claim decides caps, concurrency keys, priority, turns across orgs, start rates,
not-before and pauses in its own statements (scheduler/sql/claim.sql), through lifecycle.claim_queued_runs."""

import datetime as dt

import pytest

from scheduler.fairshare import limits
from scheduler.runs import lifecycle
from scheduler.runs.lifecycle import Concurrency, claim_queued_runs
from tests import factories
from tests.factories import one, query


def launch(org="org-a", **fields) -> str:
    """A launch that is younger than every earlier one (a test's launches share one transaction's now())."""
    run_id = factories.launch(org_id=org, **fields)
    query("UPDATE runs SET created_at = clock_timestamp() WHERE run_id = %s", [run_id])
    return run_id


def set_limits(org, **wanted):
    limits.change(org, limits.LimitsChange(**wanted), actor="test")


def claimed_ids(limit=32) -> list[str]:
    return [claim.run_id for claim in claim_queued_runs(limit)]


def settle(run_id):
    attempt, lease = one("SELECT attempt, lease_token FROM attempts WHERE run_id = %s ORDER BY attempt DESC LIMIT 1",
                         [run_id])
    from scheduler.runs import settlement
    assert settlement.settle_attempt(run_id, attempt, lease, factories.completed_result()).run_status == "completed"


@pytest.mark.requirement("FSH-1")
@pytest.mark.django_db
def test_fsh1__an_org_cap__never_more_active_than_the_cap__a_settlement_frees_a_slot():
    set_limits("org-a", max_active=2)
    runs = [launch() for _ in range(5)]
    first = claimed_ids()
    assert first == sorted(runs[:2])  # oldest first, two of five
    assert claimed_ids() == []
    settle(first[0])
    assert claimed_ids() == [runs[2]]


@pytest.mark.requirement("FSH-1")
@pytest.mark.django_db
def test_fsh1__a_cap_of_zero_holds_everything__and_the_default_cap_applies_to_orgs_without_a_row(settings):
    set_limits("org-a", max_active=0)
    launch()
    assert claimed_ids() == []
    settings.SCHEDULER_ORG_MAX_ACTIVE = 1
    other = [launch(org="org-b") for _ in range(3)]
    assert claimed_ids() == [other[0]]
    set_limits("org-b", max_active=None)  # null: the default again
    assert claimed_ids() == []
    set_limits("org-b", max_active=3)  # an org's own cap beats the default
    assert sorted(claimed_ids()) == sorted(other[1:])


@pytest.mark.requirement("FSH-2")
@pytest.mark.django_db
def test_fsh2__a_full_key_waits__runs_behind_it_with_other_keys_or_none_pass_it():
    keyed = [launch(concurrency=Concurrency("customer-7", 1)) for _ in range(3)]
    other_key = launch(concurrency=Concurrency("customer-8", 2))
    keyless = launch()
    assert sorted(claimed_ids()) == sorted([keyed[0], other_key, keyless])
    assert claimed_ids() == []  # customer-7 is full
    settle(keyed[0])
    assert claimed_ids() == [keyed[1]]


@pytest.mark.requirement("FSH-2")
@pytest.mark.django_db
def test_fsh2__keys_are_per_org():
    a = launch(concurrency=Concurrency("repo", 1))
    b = launch(org="org-b", concurrency=Concurrency("repo", 1))
    assert sorted(claimed_ids()) == sorted([a, b])


@pytest.mark.requirement("FSH-3")
@pytest.mark.django_db
def test_fsh3__within_an_org_higher_priority_first__then_oldest_first():
    low = launch(priority=-5)
    normal = [launch() for _ in range(2)]
    high = launch(priority=100)
    assert [claimed_ids(1)[0] for _ in range(4)] == [high, *normal, low]


@pytest.mark.requirement("FSH-4")
@pytest.mark.django_db
def test_fsh4__a_backlog_of_one_org__delays_another_org_by_at_most_one_claim_batch():
    query("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at)
             SELECT 'flood-' || lpad(i::text, 5, '0'), 'org-a', 'play', 'queued', '{}', 1, now() - interval '1 hour'
             FROM generate_series(1, 2000) AS i""")
    late = launch(org="org-b")
    assert late in claimed_ids(8)


@pytest.mark.requirement("FSH-4")
@pytest.mark.django_db
def test_fsh4__several_backlogged_orgs_are_served_in_turn():
    orgs = ["org-a", "org-b", "org-c"]
    for org in orgs:
        for _ in range(3):
            launch(org=org)
    served = [one("SELECT org_id FROM runs WHERE run_id = %s", [claimed_ids(1)[0]]) for _ in range(9)]
    # Every org's first run before any org's second, and so on: each round of three serves each org once.
    assert [sorted(served[i:i + 3]) for i in (0, 3, 6)] == [orgs, orgs, orgs]


@pytest.mark.requirement("FSH-6")
@pytest.mark.django_db
def test_fsh6__a_start_rate_caps_claims_in_any_rolling_minute():
    set_limits("org-a", max_starts_per_minute=2)
    runs = [launch() for _ in range(4)]
    assert claimed_ids() == sorted(runs[:2])
    for run_id in runs[:2]:
        settle(run_id)
    assert claimed_ids() == []  # settled or not, two claims this minute
    query("UPDATE org_starts SET claimed_at = claimed_at - interval '61 seconds'")
    assert claimed_ids() == sorted(runs[2:])
    assert one("SELECT count(*) FROM org_starts") == 2  # the minute-old starts were forgotten by the claim


@pytest.mark.requirement("FSH-7")
@pytest.mark.django_db
def test_fsh7__not_before__a_run_is_not_claimed_before_its_instant():
    soon = launch(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    now = launch(run_after=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    assert claimed_ids() == [now]
    query("UPDATE runs SET run_after = now() - interval '1 second' WHERE run_id = %s", [soon])
    assert claimed_ids() == [soon]


@pytest.mark.requirement("FSH-8")
@pytest.mark.django_db
def test_fsh8__a_paused_org_keeps_its_runs_queued__resume_releases_them__both_audited():
    running = launch()
    assert claimed_ids() == [running]
    waiting = launch()
    limits.change("org-a", limits.LimitsChange(paused=True, reason="incident 42"), actor="test",
                  action="org_limits_pause")
    other = launch(org="org-b")
    assert claimed_ids() == [other]
    assert one("SELECT status FROM runs WHERE run_id = %s", [running]) == "running"  # active runs go on
    limits.change("org-a", limits.LimitsChange(paused=False), actor="test", action="org_limits_resume")
    assert claimed_ids() == [waiting]
    assert query("SELECT action, target, changed FROM operator_actions ORDER BY id") == [
        ("org_limits_pause", "org:org-a", True), ("org_limits_resume", "org:org-a", True)]


@pytest.mark.django_db
def test_a_claim_answers_more_when_other_orgs_wait_beyond_its_batch():
    for org in ("org-a", "org-b", "org-c"):
        launch(org=org)
    claims = lifecycle.claim_queued_runs(2)
    assert len(claims) == 2 and claims.more
    last = lifecycle.claim_queued_runs(2)
    assert len(last) == 1 and not last.more


@pytest.mark.requirement("FSH-1")
@pytest.mark.django_db
def test_fsh1__a_dispatcher_killed_mid_claim_leaks_no_slot__the_claim_lease_recovery_frees_it(monkeypatch):
    from scheduler.conf import scheduler_settings
    from scheduler.runs import liveness
    from tests.sweep.test_recoveries import RecordingProvider

    monkeypatch.setattr(liveness, "get_provider", lambda name: RecordingProvider())
    set_limits("org-a", max_active=1)
    stranded, waiting = launch(max_attempts=3), launch()
    assert claimed_ids() == [stranded]  # its dispatcher dies before parking: the slot is held by the claim
    assert claimed_ids() == []
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=scheduler_settings.claim_lease_seconds + 1)
    assert liveness.run_once(now=later).counts["dispatch_lost"] == 1
    assert one("SELECT status FROM runs WHERE run_id = %s", [stranded]) == "queued"  # retried: the slot is free
    assert claimed_ids() == [stranded]  # the oldest again, on attempt 2; the cap still holds the other
    assert one("SELECT max(attempt) FROM attempts WHERE run_id = %s", [stranded]) == 2
    assert claimed_ids() == [] and one("SELECT status FROM runs WHERE run_id = %s", [waiting]) == "queued"


@pytest.mark.requirement("FSH-1")
@pytest.mark.django_db
def test_fsh1__a_cap_lowered_below_what_the_org_holds__claims_nothing_until_it_drops_below():
    runs = [launch() for _ in range(4)]
    assert len(claimed_ids(3)) == 3
    set_limits("org-a", max_active=1)
    assert claimed_ids() == []
    set_limits("org-a", max_active=None)
    assert claimed_ids() == [runs[3]]


def _backlog(org: str, count: int, *, key: str | None = None, limit: int | None = None, age: str = "1 hour"):
    """`count` queued runs of `org` (older than any launch of the test), keyed when `key` is given."""
    query("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at,
                               concurrency_key, concurrency_limit)
             SELECT %s || '-' || lpad(i::text, 6, '0'), %s, 'play', 'queued', '{}', 1,
                    now() - %s::interval + i * interval '1 ms', %s, %s
             FROM generate_series(1, %s) AS i""", [f"{org}-{key or 'none'}", org, age, key, limit, count])


@pytest.mark.requirement("FSH-4")
@pytest.mark.django_db
@pytest.mark.parametrize("batch,others", [(1, 1), (1, 4), (4, 3), (8, 3), (8, 12), (32, 8)])
def test_fsh4__an_org_with_a_cap_keeps_its_turn_beside_orgs_without(batch, others):
    """FSH-4: a generous cap must not cost an org its turn: the org with max_active=1000 is served about as often as each
    org without limits (the free claim once chose it, took nothing, and sent it to the back of the turn)."""
    set_limits("capped", max_active=1000)
    rounds = max(6, -(-(others + 1) * 6 // batch))
    _backlog("capped", rounds * batch)
    for index in range(others):
        _backlog(f"free-{index:02d}", rounds * batch)
    served = [one("SELECT org_id FROM runs WHERE run_id = %s", [run_id])
              for _ in range(rounds) for run_id in claimed_ids(batch)]
    due = len(served) / (others + 1)
    assert served.count("capped") >= 0.6 * due, (served.count("capped"), due, batch, others)


@pytest.mark.requirement("FSH-12")
@pytest.mark.django_db
def test_fsh12__runs_behind_any_number_of_runs_of_a_full_key_are_claimed():
    """FSH-12, no fixed walk window: 300 queued runs of a full key ahead (older, higher in the org's order) do not hide the
    keyless run and the run of another key behind them; the full key's runs say why they wait."""
    holder = launch(concurrency=Concurrency("customer-7", 1))
    assert claimed_ids(1) == [holder]
    _backlog("org-a", 300, key="customer-7", limit=1)
    keyless = launch()
    other_key = launch(concurrency=Concurrency("customer-8", 1))
    assert sorted(claimed_ids(8)) == sorted([keyless, other_key])
    assert one("SELECT count(*) FROM runs WHERE status = 'queued' AND concurrency_key = 'customer-7'") == 300
    waiting = one("SELECT min(run_id) FROM runs WHERE status = 'queued'")
    assert lifecycle.run_status(waiting).queued_because == "concurrency_key"


@pytest.mark.requirement("FSH-11")
@pytest.mark.django_db
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("capped", [False, True])
def test_fsh11__backlogged_orgs_are_served_in_proportion_to_their_weights(batch, capped):
    """FSH-11: weights 1:3, both orgs backlogged: 25/75 of the claims, within 10 points, a cap or not (a cap never costs an
    org its turn)."""
    set_limits("heavy", weight=3, **({"max_active": 10_000} if capped else {}))
    _backlog("light", 400)
    _backlog("heavy", 400)
    served = [one("SELECT org_id FROM runs WHERE run_id = %s", [run_id])
              for _ in range(200 // batch) for run_id in claimed_ids(batch)]
    assert abs(served.count("heavy") / len(served) - 0.75) <= 0.10, (served.count("heavy"), len(served))


@pytest.mark.requirement("FSH-11")
@pytest.mark.django_db
def test_fsh11__an_org_gains_nothing_by_spreading_its_backlog_over_more_keys():
    """FSH-11: within an org its keys share the org's turns: 100 keys against one, equal weights, half the claims each."""
    query("""INSERT INTO runs (run_id, org_id, play_name, status, launch_json, max_attempts, created_at,
                               concurrency_key, concurrency_limit)
             SELECT 'spread-' || lpad(i::text, 5, '0'), 'spread', 'play', 'queued', '{}', 1,
                    now() - interval '1 hour' + i * interval '1 ms', 'key-' || (i %% 100), 1000
             FROM generate_series(1, 300) AS i""")
    _backlog("single", 300, key="only", limit=1000)
    served = [one("SELECT org_id FROM runs WHERE run_id = %s", [run_id])
              for _ in range(20) for run_id in claimed_ids(8)]
    assert abs(served.count("spread") / len(served) - 0.5) <= 0.10, (served.count("spread"), len(served))
