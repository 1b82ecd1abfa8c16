-- Fragments of fair share (FSH): what the claim, the status read and the operators' reads count alike.

-- fragment: org_active_runs(org_key)
-- FSH-1: an org's active runs (claimed and not yet settled, not waiting durably: WAIT-6); runs without an org are the org ''. Read through the org holding index.
(SELECT count(*) FROM __schema__.runs AS active
 WHERE coalesce(active.org_id, '') = {org_key} AND {{holds_slot(active)}})

-- fragment: org_active_runs_up_to(org_key, bound)
-- FSH-1: org_active_runs, counted no further than `bound` (the claim's cap: it only asks whether, and by how much, the org is under it). Its order (the org holding index's) and LIMIT make the count a plain index scan, which marks a settled run's entry dead the first time it visits its page; a bitmap scan visits that page again on every claim until vacuum (beside many durable waits, a page per settled run).
(SELECT count(*) FROM (SELECT FROM __schema__.runs AS active
                       WHERE coalesce(active.org_id, '') = {org_key} AND {{holds_slot(active)}}
                       ORDER BY coalesce(active.org_id, ''), active.concurrency_key
                       LIMIT greatest({bound}, 0)) AS held)

-- fragment: key_active_runs(org_key, concurrency_key)
-- FSH-2: an org's active runs that hold one concurrency key.
(SELECT count(*) FROM __schema__.runs AS active
 WHERE coalesce(active.org_id, '') = {org_key} AND active.concurrency_key = {concurrency_key}
   AND {{holds_slot(active)}})

-- fragment: org_recent_starts(org_key)
-- FSH-6: an org's claims in the rolling minute before this statement (only rate-limited orgs keep them).
(SELECT count(*) FROM __schema__.org_starts AS start
 WHERE start.org_id = {org_key} AND start.claimed_at > statement_timestamp() - interval '60 seconds')

-- fragment: queued_because(run, default_max_active)
-- FSH-9: why a queued run waits, first reason first: its org is paused, its not-before is ahead, its org is at its cap or start rate, its key is full; else it waits its turn. WAIT-6: a run waiting durably waits for its `event` or `timer`. NULL for any other run that is not queued.
(SELECT CASE
            WHEN {{durable_wait({run})}} THEN {run}.suspension_json ->> 'kind'
            WHEN {run}.status <> 'queued' THEN NULL
            WHEN coalesce(limits.paused, false) THEN 'paused'
            WHEN {run}.run_after > statement_timestamp() THEN 'not_before'
            WHEN coalesce(limits.max_active, {default_max_active}) <= {{org_active_runs(coalesce({run}.org_id, ''))}}
                THEN 'org_limit'
            WHEN limits.max_starts_per_minute <= {{org_recent_starts(coalesce({run}.org_id, ''))}} THEN 'rate_limit'
            WHEN {run}.concurrency_key IS NOT NULL
                 AND {run}.concurrency_limit <= {{key_active_runs(coalesce({run}.org_id, ''), {run}.concurrency_key)}}
                THEN 'concurrency_key'
            ELSE 'turn'
        END
 FROM (SELECT 1) AS one
 LEFT JOIN __schema__.org_limits AS limits ON limits.org_id = coalesce({run}.org_id, ''))
