-- name: runs_claim_lock_orgs
-- Choose the orgs the next claim serves and lock, in org order, each one whose claim must be counted exactly (FSH-1, FSH-2, FSH-4, FSH-6, FSH-8); run first in the claim's transaction, so runs_claim_queued's snapshot sees every claim committed before these locks.
-- plan: generic
-- (Planned once: planning it for its values cost more than running it.)
-- Orgs with due queued runs, found by a skip scan of the org queue index (one probe an org, never a walk of a backlog);
-- paused orgs and orgs at their cap or start rate by this statement's count are left out; the org served least
-- recently goes first. An org is counted (locked) when it has a cap, a start rate or a keyed run queued: the
-- others have no limit two claimers could both pass, and are shared through SKIP LOCKED instead.
WITH RECURSIVE {{claim_open_orgs()}}
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
WITH {{claim_chosen()}}
, allowance AS MATERIALIZED (
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
), {{claim_free_walk(allowance)}}
, counted_walk AS MATERIALIZED (
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
), {{claim_picked(%(take_turns)s::boolean)}}, counted_start AS (
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
)
{{claim_answer()}};

-- name: runs_claim_queued_free
-- The claim's usual form, one statement: choose the orgs in their turn as runs_claim_lock_orgs does and claim from those nobody counts (no cap, start rate or keyed run), SKIP LOCKED, priority then age within an org, one rank at a time across orgs; a last row (run_id null) says whether a counted org was chosen and how many orgs were open (RUN-2, FSH-3, FSH-4, FSH-7, FSH-8).
-- plan: generic
-- A counted org chosen here takes nothing: its claim needs runs_claim_lock_orgs's lock before its snapshot.
WITH RECURSIVE {{claim_open_orgs()}}
, allowance AS MATERIALIZED (
    SELECT chosen.org_key, chosen.counted, chosen.place, NULL::integer AS rate,
           CASE WHEN chosen.counted THEN 0 ELSE %(limit)s::integer END AS allowed
    FROM chosen
), {{claim_free_walk(allowance)}}
, picked AS MATERIALIZED (
    SELECT free_walk.run_id, free_walk.org_key, free_walk.rate
    FROM free_walk
    ORDER BY free_walk.rank, free_walk.place, free_walk.run_id
    LIMIT %(limit)s::integer
), {{claim_picked((SELECT coalesce(max(chosen.open_orgs), 0) > 1 FROM chosen))}}
SELECT answer.*, NULL::boolean AS counted_chosen, NULL::bigint AS open_orgs, NULL::bigint AS chosen_orgs
FROM ({{claim_answer()}}) AS answer
UNION ALL
SELECT NULL::text, NULL::integer, NULL::text, NULL::timestamptz, NULL::text, NULL::text, NULL::jsonb, NULL::jsonb,
       NULL::integer, NULL::bigint,
       EXISTS (SELECT 1 FROM chosen WHERE chosen.counted), (SELECT coalesce(max(chosen.open_orgs), 0) FROM chosen),
       (SELECT count(*) FROM chosen);
