-- Fragments of the claim (RUN-2, FSH-1..8): what its two forms share word for word.

-- fragment: claim_open_orgs()
-- FSH-1, FSH-4, FSH-7, FSH-8, FSH-11: the orgs with due queued runs (a skip scan of the org queue index: one probe an org, which passes over the org's runs not yet due), less paused orgs and orgs at their cap or start rate by this statement's count, furthest behind in the weighted turn first, at most one an org per run the claim may take; whether each must be counted (a cap, a start rate or a keyed run queued) and how many were open. Starts a WITH RECURSIVE.
queued_org AS (
    ({{first_due_org()}})
    UNION ALL
    SELECT ({{next_due_org(queued_org.org_key)}})
    FROM queued_org
    WHERE queued_org.org_key IS NOT NULL
), org AS MATERIALIZED (
    SELECT queued_org.org_key, turn.last_claimed_at, turn.virtual_pass, coalesce(limits.weight, 1) AS weight,
           coalesce(limits.max_active, %(default_max_active)s::integer) AS cap,
           limits.max_starts_per_minute AS rate
    FROM queued_org
    -- One probe of each table per org (LATERAL, LIMIT 1 so it stays a probe): as a join, the generic plan hashed
    -- the whole table on every claim, however few orgs queue.
    LEFT JOIN LATERAL (SELECT org_limit.* FROM __schema__.org_limits AS org_limit
                       WHERE org_limit.org_id = queued_org.org_key LIMIT 1) AS limits ON true
    LEFT JOIN LATERAL (SELECT org_turn.* FROM __schema__.org_claim_turns AS org_turn
                       WHERE org_turn.org_id = queued_org.org_key LIMIT 1) AS turn ON true
    WHERE queued_org.org_key IS NOT NULL AND NOT coalesce(limits.paused, false)
), open_org AS (
    SELECT org.org_key, org.last_claimed_at, org.virtual_pass, org.weight,
           org.cap IS NOT NULL OR org.rate IS NOT NULL
           OR {{keyed_run_queued(org.org_key)}} AS counted
    FROM org
    -- CASE, not OR: only an org with a cap (a rate) has its active runs (its starts) counted.
    WHERE CASE WHEN org.cap IS NULL THEN true ELSE org.cap > {{org_active_runs_up_to(org.org_key, org.cap)}} END
      AND CASE WHEN org.rate IS NULL THEN true ELSE org.rate > {{org_recent_starts(org.org_key)}} END
), clock AS MATERIALIZED (
    -- FSH-11: the turn's virtual time: the furthest-behind org served in the last minute (else the furthest ahead).
    -- An org new to the turn, or back after an idle spell, starts there: first in line, never with a burst owed.
    SELECT coalesce(min(open_org.virtual_pass) FILTER (
                        WHERE open_org.last_claimed_at > statement_timestamp() - interval '60 seconds'),
                    max(open_org.virtual_pass), 0) AS now_pass
    FROM open_org
), chosen AS MATERIALIZED (
    SELECT open_org.org_key, open_org.counted, open_org.weight, count(*) OVER () AS open_orgs,
           greatest(coalesce(open_org.virtual_pass, clock.now_pass), clock.now_pass) AS virtual_pass,
           row_number() OVER (ORDER BY greatest(coalesce(open_org.virtual_pass, clock.now_pass), clock.now_pass),
                                       open_org.last_claimed_at NULLS FIRST, open_org.org_key) AS place
    FROM open_org
    CROSS JOIN clock
    ORDER BY place
    LIMIT %(limit)s::integer
)

-- fragment: claim_chosen()
-- RUN-2, FSH-11: the counted orgs the free claim left to this one, in their turn order, with each one's weight and virtual time (the free claim's clock, `now_pass`, for an org new to the turn).
chosen AS MATERIALIZED (
    SELECT chosen.org_key, true AS counted, chosen.place, coalesce(limits.weight, 1) AS weight,
           greatest(coalesce(turn.virtual_pass, %(now_pass)s::double precision), %(now_pass)s::double precision)
               AS virtual_pass
    FROM unnest(%(orgs)s::text[]) WITH ORDINALITY AS chosen (org_key, place)
    LEFT JOIN LATERAL (SELECT org_limit.weight FROM __schema__.org_limits AS org_limit
                       WHERE org_limit.org_id = chosen.org_key LIMIT 1) AS limits ON true
    LEFT JOIN LATERAL (SELECT org_turn.virtual_pass FROM __schema__.org_claim_turns AS org_turn
                       WHERE org_turn.org_id = chosen.org_key LIMIT 1) AS turn ON true
)

-- fragment: claim_free_walk(allowance)
-- FSH-4, FSH-11: the walk of each org no claimer counts: its due keyless runs, priority then age, its weighted share of the batch at most, SKIP LOCKED so concurrent claimers of one org take different runs; ranked within the org.
share AS MATERIALIZED (
    -- FSH-11: each chosen org's share of the batch, by its weight among the chosen orgs' weights.
    SELECT chosen.org_key,
           ceil(%(limit)s::numeric * chosen.weight / greatest(sum(chosen.weight) OVER (), 1))::integer AS per_org
    FROM chosen
), free_walk AS (
    SELECT walk.run_id, allowance.org_key, allowance.place, allowance.rate, allowance.weight, allowance.virtual_pass,
           row_number() OVER (PARTITION BY allowance.org_key
                              ORDER BY walk.priority DESC, walk.created_at, walk.run_id) AS rank
    FROM {allowance} AS allowance
    JOIN share ON share.org_key = allowance.org_key
    CROSS JOIN LATERAL (
        {{free_org_walk(allowance.org_key, greatest(least(allowance.allowed, share.per_org), 0))}}
    ) AS walk
    WHERE NOT allowance.counted AND allowance.allowed > 0
)

-- fragment: claim_picked(take_turns, turn_counted, places)
-- RUN-2: claim what `picked` names: lock each run still queued (SKIP LOCKED), attempt n+1 with a fresh lease, older attempts retired, the run running, run.started written; FSH-4, FSH-11: each org the statement could serve moves on in the turn by what it took, or by its `places` in the batch when it took fewer (an org alone in the queue needs no turn); a counted org only when `turn_counted` (the statement that counted it).
candidate AS MATERIALIZED (
    SELECT run.run_id
    FROM __schema__.runs AS run
    WHERE run.run_id = ANY (ARRAY(SELECT picked.run_id FROM picked)) AND run.status = 'queued'
    FOR NO KEY UPDATE SKIP LOCKED
), numbered AS MATERIALIZED (
    SELECT candidate.run_id,
           coalesce((SELECT max(attempt.attempt) FROM __schema__.attempts AS attempt
                     WHERE attempt.run_id = candidate.run_id), 0) + 1 AS attempt
    FROM candidate
), retired AS (
    UPDATE __schema__.attempts AS older
    SET status = 'released', updated_at = now()
    WHERE older.run_id = ANY (ARRAY(SELECT numbered.run_id FROM numbered))
      AND older.status IN ('claimed', 'running', 'waiting')
    RETURNING older.run_id
), claimed AS (
    INSERT INTO __schema__.attempts (run_id, attempt, status, lease_token, lease_expires_at, created_at, updated_at)
    SELECT numbered.run_id, numbered.attempt, 'claimed', replace(gen_random_uuid()::text, '-', ''),
           now() + make_interval(secs => %(lease_seconds)s::double precision), now(), now()
    FROM numbered
    RETURNING run_id, attempt, lease_token, lease_expires_at
), started AS (
    UPDATE __schema__.runs AS run
    SET status = 'running', started_at = coalesce(run.started_at, now()), suspension_json = NULL, updated_at = now()
    WHERE run.run_id = ANY (ARRAY(SELECT candidate.run_id FROM candidate))
    RETURNING run.run_id, run.org_id, run.play_name, run.input_json, run.launch_json, run.max_attempts
), started_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT claimed.run_id || ':' || claimed.attempt || ':run.started', claimed.run_id, 'run.started',
           jsonb_build_object('runId', claimed.run_id, 'attempt', claimed.attempt),
           'ledger', __schema__.next_fact_time(claimed.run_id, 0)
    FROM claimed
    ON CONFLICT (event_id) DO NOTHING
), turned AS (
    -- FSH-4, FSH-11: each org this claim could serve moves on in the turn by what it took over its weight, or by
    -- its places in the batch when it took fewer (a full key, runs another claimer held): it had its turn. An org
    -- the batch had no place for keeps its own. An org alone in the queue needs no turn.
    INSERT INTO __schema__.org_claim_turns (org_id, last_claimed_at, virtual_pass)
    SELECT charged.org_key, statement_timestamp(),
           charged.virtual_pass + charged.claims::double precision / charged.weight
    FROM (SELECT chosen.org_key, chosen.virtual_pass, chosen.weight,
                 greatest((SELECT count(*) FROM started WHERE coalesce(started.org_id, '') = chosen.org_key),
                          {places}) AS claims
          FROM chosen
          WHERE {take_turns} AND ({turn_counted} OR NOT chosen.counted)) AS charged
    WHERE charged.claims > 0
    ORDER BY charged.org_key
    ON CONFLICT (org_id) DO UPDATE SET last_claimed_at = excluded.last_claimed_at,
                                       virtual_pass = excluded.virtual_pass
)

-- fragment: claim_answer()
-- RUN-2: what a claim answers, one row per run it claimed.
SELECT claimed.run_id, claimed.attempt, claimed.lease_token, claimed.lease_expires_at,
       started.org_id, started.play_name, started.input_json, started.launch_json, started.max_attempts,
       (SELECT count(*) FROM retired) AS retired_attempts
FROM claimed
JOIN started ON started.run_id = claimed.run_id
ORDER BY claimed.run_id

-- fragment: first_due_org()
-- FSH-1: the first org with due queued runs, in the org queue index's order (the skip scan's first probe).
SELECT coalesce(run.org_id, '') AS org_key
FROM __schema__.runs AS run
WHERE run.status = 'queued' AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
ORDER BY coalesce(run.org_id, '')
LIMIT 1

-- fragment: next_due_org(after)
-- FSH-1: the next org after `after` with due queued runs, or null (the skip scan's next probe; an ordered LIMIT 1
-- keeps a generic plan on the org queue index).
SELECT coalesce(run.org_id, '')
FROM __schema__.runs AS run
WHERE run.status = 'queued' AND coalesce(run.org_id, '') > {after}
  AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
ORDER BY coalesce(run.org_id, '')
LIMIT 1

-- fragment: keyed_run_queued(org_key)
-- FSH-2: whether the org has a keyed run queued (due or not), which makes it counted.
EXISTS (SELECT 1 FROM __schema__.runs AS keyed
        WHERE coalesce(keyed.org_id, '') = {org_key} AND keyed.status = 'queued'
          AND keyed.concurrency_key IS NOT NULL)

-- fragment: free_org_walk(org_key, limit)
-- FSH-4: an uncounted org's due keyless runs, priority then age, at most `limit`, SKIP LOCKED so concurrent claimers of one org take different runs (through the keyless queue index).
SELECT run.run_id, run.priority, run.created_at
FROM __schema__.runs AS run
WHERE coalesce(run.org_id, '') = {org_key} AND run.status = 'queued'
  AND run.concurrency_key IS NULL
  AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
ORDER BY coalesce(run.org_id, ''), run.priority DESC, run.created_at, run.run_id
LIMIT {limit}
FOR NO KEY UPDATE SKIP LOCKED
