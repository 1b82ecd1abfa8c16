-- name: runs_claim_lock_orgs
-- Choose the orgs the next claim serves and lock, in org order, each one whose claim must be counted exactly (FSH-1, FSH-2, FSH-4, FSH-6, FSH-8); run first in the claim's transaction, so runs_claim_queued's snapshot sees every claim committed before these locks.
-- plan: generic
-- (Planned once: planning it for its values cost more than running it.)
-- Orgs with due queued runs, found by a skip scan of the org queue index (one probe an org, never a walk of a backlog);
-- paused orgs and orgs at their cap or start rate by this statement's count are left out; the org served least
-- recently goes first. An org is counted (locked) when it has a cap, a start rate or a keyed run queued: the
-- others have no limit two claimers could both pass, and are shared through SKIP LOCKED instead.
WITH RECURSIVE queued_org AS (
    (SELECT coalesce(run.org_id, '') AS org_key
     FROM __schema__.runs AS run
     WHERE run.status = 'queued'
     ORDER BY coalesce(run.org_id, '')
     LIMIT 1)
    UNION ALL
    SELECT (SELECT coalesce(run.org_id, '')
            FROM __schema__.runs AS run
            WHERE run.status = 'queued' AND coalesce(run.org_id, '') > queued_org.org_key
            ORDER BY coalesce(run.org_id, '')
            LIMIT 1)
    FROM queued_org
    WHERE queued_org.org_key IS NOT NULL
), org AS MATERIALIZED (
    SELECT queued_org.org_key, turn.last_claimed_at,
           coalesce(limits.max_active, %(default_max_active)s::integer) AS cap,
           limits.max_starts_per_minute AS rate
    FROM queued_org
    LEFT JOIN __schema__.org_limits AS limits ON limits.org_id = queued_org.org_key
    LEFT JOIN __schema__.org_claim_turns AS turn ON turn.org_id = queued_org.org_key
    WHERE queued_org.org_key IS NOT NULL AND NOT coalesce(limits.paused, false)
), open_org AS (
    SELECT org.org_key, org.last_claimed_at,
           org.cap IS NOT NULL OR org.rate IS NOT NULL
           OR EXISTS (SELECT 1 FROM __schema__.runs AS keyed
                      WHERE coalesce(keyed.org_id, '') = org.org_key AND keyed.status = 'queued'
                        AND keyed.concurrency_key IS NOT NULL) AS counted
    FROM org
    -- CASE, not OR: only an org with a cap (a rate) has its active runs (its starts) counted.
    WHERE CASE WHEN org.cap IS NULL THEN true ELSE org.cap > {{org_active_runs(org.org_key)}} END
      AND CASE WHEN org.rate IS NULL THEN true ELSE org.rate > {{org_recent_starts(org.org_key)}} END
      AND EXISTS (SELECT 1 FROM __schema__.runs AS due
                  WHERE coalesce(due.org_id, '') = org.org_key AND due.status = 'queued'
                    AND (due.run_after IS NULL OR due.run_after <= statement_timestamp()))
), chosen AS MATERIALIZED (
    SELECT open_org.org_key, open_org.counted, count(*) OVER () AS open_orgs
    FROM open_org
    ORDER BY open_org.last_claimed_at NULLS FIRST, open_org.org_key
    LIMIT %(limit)s::integer
)
SELECT ordered.org_key, ordered.counted, ordered.open_orgs,
       CASE WHEN ordered.counted
            THEN pg_advisory_xact_lock(hashtext('__schema__.org_claim'), hashtext(ordered.org_key))::text
       END AS locked
FROM (SELECT chosen.org_key, chosen.counted, chosen.open_orgs FROM chosen ORDER BY chosen.org_key OFFSET 0) AS ordered;

-- name: runs_claim_queued
-- Claim queued runs of the orgs runs_claim_lock_orgs chose, in their turn (SKIP LOCKED): within an org by priority then age, across orgs one rank at a time, never past an org's cap, start rate or a key's limit; each claim is attempt n+1 with a fresh lease token, older attempts retired, run running, run.started written (RUN-2, FSH-1..8).
-- plan: generic
-- An org that was not counted (locked) is walked with SKIP LOCKED, so concurrent claimers of one org take
-- different runs; a counted org is walked over its next %(walk)s due runs (no other claimer counts it now), so a
-- run waiting for its key does not hide the runs behind it. Every lookup after the walks is by key.
WITH chosen AS MATERIALIZED (
    SELECT chosen.org_key, chosen.counted, chosen.place
    FROM unnest(%(orgs)s::text[], %(counted)s::boolean[]) WITH ORDINALITY AS chosen (org_key, counted, place)
), allowance AS MATERIALIZED (
    SELECT chosen.org_key, chosen.counted, chosen.place, limits.max_starts_per_minute AS rate,
           CASE
               WHEN coalesce(limits.paused, false) THEN 0
               -- A limit set after the org was chosen unlocked waits for a claim that locks it (FSH-1: never over).
               WHEN NOT chosen.counted AND (coalesce(limits.max_active, %(default_max_active)s::integer) IS NOT NULL
                                            OR limits.max_starts_per_minute IS NOT NULL) THEN 0
               -- Each count only where its limit is set: an unlimited org's active runs are never counted.
               ELSE least(%(limit)s::integer,
                          CASE WHEN coalesce(limits.max_active, %(default_max_active)s::integer) IS NOT NULL
                               THEN coalesce(limits.max_active, %(default_max_active)s::integer)
                                    - {{org_active_runs(chosen.org_key)}} END,
                          CASE WHEN limits.max_starts_per_minute IS NOT NULL
                               THEN limits.max_starts_per_minute - {{org_recent_starts(chosen.org_key)}} END)
           END AS allowed
    FROM chosen
    LEFT JOIN __schema__.org_limits AS limits ON limits.org_id = chosen.org_key
), share AS MATERIALIZED (
    SELECT ceil(%(limit)s::numeric / greatest(count(*), 1))::integer AS per_org FROM chosen
), free_walk AS (
    SELECT walk.run_id, allowance.org_key, allowance.place, allowance.rate,
           row_number() OVER (PARTITION BY allowance.org_key
                              ORDER BY walk.priority DESC, walk.created_at, walk.run_id) AS rank
    FROM allowance
    CROSS JOIN share
    CROSS JOIN LATERAL (
        SELECT run.run_id, run.priority, run.created_at
        FROM __schema__.runs AS run
        WHERE coalesce(run.org_id, '') = allowance.org_key AND run.status = 'queued'
          AND run.concurrency_key IS NULL
          AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
        ORDER BY coalesce(run.org_id, ''), run.priority DESC, run.created_at, run.run_id
        LIMIT greatest(least(allowance.allowed, share.per_org), 0)
        FOR NO KEY UPDATE SKIP LOCKED
    ) AS walk
    WHERE NOT allowance.counted AND allowance.allowed > 0
), counted_walk AS MATERIALIZED (
    SELECT walk.run_id, walk.priority, walk.created_at, walk.concurrency_key, walk.concurrency_limit,
           allowance.org_key, allowance.place, allowance.rate, allowance.allowed,
           row_number() OVER (PARTITION BY allowance.org_key, walk.concurrency_key
                              ORDER BY walk.priority DESC, walk.created_at, walk.run_id) AS key_rank
    FROM allowance
    CROSS JOIN LATERAL (
        SELECT run.run_id, run.priority, run.created_at, run.concurrency_key, run.concurrency_limit
        FROM __schema__.runs AS run
        WHERE coalesce(run.org_id, '') = allowance.org_key AND run.status = 'queued'
          AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
        ORDER BY coalesce(run.org_id, ''), run.priority DESC, run.created_at, run.run_id
        LIMIT %(walk)s::integer
    ) AS walk
    WHERE allowance.counted AND allowance.allowed > 0
), key_held AS MATERIALIZED (
    SELECT keys.org_key, keys.concurrency_key, {{key_active_runs(keys.org_key, keys.concurrency_key)}} AS held
    FROM (SELECT DISTINCT counted_walk.org_key, counted_walk.concurrency_key
          FROM counted_walk WHERE counted_walk.concurrency_key IS NOT NULL) AS keys
), counted_fit AS (
    SELECT counted_walk.run_id, counted_walk.org_key, counted_walk.place, counted_walk.rate, counted_walk.allowed,
           row_number() OVER (PARTITION BY counted_walk.org_key
                              ORDER BY counted_walk.priority DESC, counted_walk.created_at, counted_walk.run_id) AS rank
    FROM counted_walk
    LEFT JOIN key_held ON key_held.org_key = counted_walk.org_key
                      AND key_held.concurrency_key = counted_walk.concurrency_key
    WHERE counted_walk.concurrency_key IS NULL
       OR key_held.held + counted_walk.key_rank <= counted_walk.concurrency_limit
), picked AS MATERIALIZED (
    SELECT fit.run_id, fit.org_key, fit.rate
    FROM (SELECT free_walk.run_id, free_walk.org_key, free_walk.place, free_walk.rate, free_walk.rank FROM free_walk
          UNION ALL
          SELECT counted_fit.run_id, counted_fit.org_key, counted_fit.place, counted_fit.rate, counted_fit.rank
          FROM counted_fit WHERE counted_fit.rank <= counted_fit.allowed) AS fit
    ORDER BY fit.rank, fit.place, fit.run_id
    LIMIT %(limit)s::integer
), candidate AS MATERIALIZED (
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
), counted_start AS (
    -- FSH-6: a rate-limited org's claims are kept for the minute they count in.
    INSERT INTO __schema__.org_starts (org_id, run_id, attempt, claimed_at)
    SELECT picked.org_key, claimed.run_id, claimed.attempt, statement_timestamp()
    FROM claimed
    JOIN picked ON picked.run_id = claimed.run_id
    WHERE picked.rate IS NOT NULL
), forgotten_start AS (
    DELETE FROM __schema__.org_starts AS start
    WHERE start.org_id = ANY (ARRAY(SELECT allowance.org_key FROM allowance WHERE allowance.rate IS NOT NULL))
      AND start.claimed_at <= statement_timestamp() - interval '60 seconds'
), turned AS (
    -- FSH-4: every org this claim considered goes to the back of the turn; an org alone in the queue needs none.
    INSERT INTO __schema__.org_claim_turns (org_id, last_claimed_at)
    SELECT chosen.org_key, statement_timestamp()
    FROM chosen
    WHERE %(take_turns)s::boolean
    ORDER BY chosen.org_key
    ON CONFLICT (org_id) DO UPDATE SET last_claimed_at = excluded.last_claimed_at
)
SELECT claimed.run_id, claimed.attempt, claimed.lease_token, claimed.lease_expires_at,
       started.org_id, started.play_name, started.input_json, started.launch_json, started.max_attempts,
       (SELECT count(*) FROM retired) AS retired_attempts
FROM claimed
JOIN started ON started.run_id = claimed.run_id
ORDER BY claimed.run_id;
