-- name: runs_claim_lock_orgs
-- Lock, in org order, the counted orgs (a cap, a start rate or a keyed run queued) that runs_claim_queued_free chose and left to this claim (FSH-1, FSH-2, FSH-4, FSH-6); run first in the claim's transaction, so runs_claim_queued's snapshot sees every claim committed before these locks.
SELECT given.org_key,
       pg_advisory_xact_lock(hashtext('__schema__.org_claim'), hashtext(given.org_key))::text AS locked
FROM (SELECT DISTINCT org.org_key FROM unnest(%(orgs)s::text[]) AS org (org_key) ORDER BY org.org_key OFFSET 0) AS given;

-- name: runs_claim_queued
-- Claim queued runs of the counted orgs runs_claim_lock_orgs locked, in their turn (SKIP LOCKED): within an org by priority then age, across orgs one rank at a time, never past an org's cap, start rate or a key's limit; each claim is attempt n+1 with a fresh lease token, older attempts retired, run running, run.started written (RUN-2, FSH-1..8, FSH-12).
-- plan: generic
-- Each org (locked: no other claimer counts it now) is read in two parts, so no number of runs of a full key
-- hides a claimable run behind them (FSH-12): its keyless runs in its order, and its keys one by one (a
-- skip scan), each giving only what its limit leaves. Every lookup after that is by key.
WITH RECURSIVE {{claim_chosen()}}
, allowance AS MATERIALIZED (
    SELECT chosen.org_key, chosen.place, chosen.weight, chosen.virtual_pass,
           limits.max_starts_per_minute AS rate,
           CASE
               WHEN coalesce(limits.paused, false) THEN 0
               -- Each count only where its limit is set: an unlimited org's active runs are never counted.
               ELSE least(%(limit)s::integer,
                          CASE WHEN coalesce(limits.max_active, %(default_max_active)s::integer) IS NOT NULL
                               THEN coalesce(limits.max_active, %(default_max_active)s::integer)
                                    - {{org_active_runs_up_to(chosen.org_key, coalesce(limits.max_active, %(default_max_active)s::integer))}} END,
                          CASE WHEN limits.max_starts_per_minute IS NOT NULL
                               THEN limits.max_starts_per_minute - {{org_recent_starts(chosen.org_key)}} END)
           END AS allowed
    FROM chosen
    LEFT JOIN __schema__.org_limits AS limits ON limits.org_id = chosen.org_key
), counted_org AS MATERIALIZED (
    SELECT allowance.org_key, allowance.place, allowance.rate, allowance.allowed, allowance.weight,
           allowance.virtual_pass
    FROM allowance
    WHERE allowance.allowed > 0
), queued_key AS (
    -- The keys of each counted org with queued runs: one probe a key (a skip scan of the org key queue index).
    SELECT counted_org.org_key,
           (SELECT run.concurrency_key FROM __schema__.runs AS run
            WHERE coalesce(run.org_id, '') = counted_org.org_key AND run.status = 'queued'
              AND run.concurrency_key IS NOT NULL
            ORDER BY coalesce(run.org_id, ''), run.concurrency_key LIMIT 1) AS concurrency_key
    FROM counted_org
    UNION ALL
    SELECT queued_key.org_key,
           (SELECT run.concurrency_key FROM __schema__.runs AS run
            WHERE coalesce(run.org_id, '') = queued_key.org_key AND run.status = 'queued'
              AND run.concurrency_key > queued_key.concurrency_key
            ORDER BY coalesce(run.org_id, ''), run.concurrency_key LIMIT 1)
    FROM queued_key
    WHERE queued_key.concurrency_key IS NOT NULL
), key_room AS MATERIALIZED (
    -- What each key's limit leaves: its first due run's limit less the runs of the org holding the key.
    SELECT keyed.org_key, keyed.concurrency_key, keyed.held,
           greatest(least(counted_org.allowed, head.concurrency_limit - keyed.held), 0) AS room
    FROM (SELECT queued_key.org_key, queued_key.concurrency_key,
                 {{key_active_runs(queued_key.org_key, queued_key.concurrency_key)}} AS held
          FROM queued_key WHERE queued_key.concurrency_key IS NOT NULL) AS keyed
    JOIN counted_org ON counted_org.org_key = keyed.org_key
    CROSS JOIN LATERAL (
        SELECT run.concurrency_limit FROM __schema__.runs AS run
        WHERE coalesce(run.org_id, '') = keyed.org_key AND run.concurrency_key = keyed.concurrency_key
          AND run.status = 'queued' AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
        ORDER BY coalesce(run.org_id, ''), run.concurrency_key, run.priority DESC, run.created_at, run.run_id
        LIMIT 1
    ) AS head
), counted_walk AS MATERIALIZED (
    SELECT walk.run_id, walk.priority, walk.created_at, NULL::text AS concurrency_key,
           NULL::integer AS concurrency_limit, 0::bigint AS held, counted_org.org_key
    FROM counted_org
    CROSS JOIN LATERAL (
        SELECT run.run_id, run.priority, run.created_at
        FROM __schema__.runs AS run
        WHERE coalesce(run.org_id, '') = counted_org.org_key AND run.status = 'queued'
          AND run.concurrency_key IS NULL
          AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
        ORDER BY coalesce(run.org_id, ''), run.priority DESC, run.created_at, run.run_id
        LIMIT counted_org.allowed
    ) AS walk
    UNION ALL
    SELECT walk.run_id, walk.priority, walk.created_at, key_room.concurrency_key, walk.concurrency_limit,
           key_room.held, key_room.org_key
    FROM key_room
    CROSS JOIN LATERAL (
        SELECT run.run_id, run.priority, run.created_at, run.concurrency_limit
        FROM __schema__.runs AS run
        WHERE coalesce(run.org_id, '') = key_room.org_key AND run.concurrency_key = key_room.concurrency_key
          AND run.status = 'queued' AND (run.run_after IS NULL OR run.run_after <= statement_timestamp())
        ORDER BY coalesce(run.org_id, ''), run.concurrency_key, run.priority DESC, run.created_at, run.run_id
        LIMIT key_room.room
    ) AS walk
    WHERE key_room.room > 0
), counted_fit AS (
    SELECT ranked.run_id, ranked.org_key, counted_org.place, counted_org.rate, counted_org.allowed,
           counted_org.weight, counted_org.virtual_pass,
           row_number() OVER (PARTITION BY ranked.org_key
                              ORDER BY ranked.priority DESC, ranked.created_at, ranked.run_id) AS rank
    FROM (SELECT counted_walk.*,
                 row_number() OVER (PARTITION BY counted_walk.org_key, counted_walk.concurrency_key
                                    ORDER BY counted_walk.priority DESC, counted_walk.created_at,
                                             counted_walk.run_id) AS key_rank
          FROM counted_walk) AS ranked
    JOIN counted_org ON counted_org.org_key = ranked.org_key
    WHERE ranked.concurrency_key IS NULL OR ranked.held + ranked.key_rank <= ranked.concurrency_limit
), picked AS MATERIALIZED (
    -- FSH-11: across orgs by each run's virtual finish (its org's virtual time, plus its rank over the org's weight).
    SELECT fit.run_id, fit.org_key, fit.rate
    FROM counted_fit AS fit
    WHERE fit.rank <= fit.allowed
    ORDER BY fit.virtual_pass + fit.rank::double precision / fit.weight, fit.place, fit.run_id
    LIMIT %(limit)s::integer
), {{claim_picked(%(take_turns)s::boolean, true, 1)}}, counted_start AS (
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
-- The claim's usual form, one statement: choose the orgs with due queued runs in their turn and claim from those nobody counts (no cap, start rate or keyed run), SKIP LOCKED, priority then age within an org, one rank at a time across orgs; a last row (run_id null) says whether a counted org was chosen and how many orgs were open (RUN-2, FSH-3, FSH-4, FSH-7, FSH-8).
-- plan: generic
-- A counted org chosen here takes nothing: its claim needs runs_claim_lock_orgs's lock before its snapshot. So it
-- keeps its places in the batch (the free orgs take at most the rest, so the counted claim that follows has room)
-- and its place in the turn (only the orgs this statement could serve go to the back): FSH-4.
WITH RECURSIVE {{claim_open_orgs()}}
, allowance AS MATERIALIZED (
    SELECT chosen.org_key, chosen.counted, chosen.place, chosen.weight, chosen.virtual_pass, NULL::integer AS rate,
           CASE WHEN chosen.counted THEN 0 ELSE %(limit)s::integer END AS allowed
    FROM chosen
), {{claim_free_walk(allowance)}}
, place_in_batch AS MATERIALIZED (
    -- FSH-4, FSH-11: the batch's places by virtual finish, as if every chosen org had runs enough; those of the
    -- counted orgs are kept for the counted claim.
    SELECT chosen.org_key, chosen.counted
    FROM chosen
    JOIN share ON share.org_key = chosen.org_key
    CROSS JOIN LATERAL generate_series(1, share.per_org) AS rank
    ORDER BY chosen.virtual_pass + rank::double precision / chosen.weight, chosen.place
    LIMIT %(limit)s::integer
), picked AS MATERIALIZED (
    SELECT free_walk.run_id, free_walk.org_key, free_walk.rate
    FROM free_walk
    ORDER BY free_walk.virtual_pass + free_walk.rank::double precision / free_walk.weight, free_walk.place,
             free_walk.run_id
    LIMIT %(limit)s::integer - (SELECT count(*) FROM place_in_batch WHERE place_in_batch.counted)
), {{claim_picked((SELECT coalesce(max(chosen.open_orgs), 0) > 1 FROM chosen), false, (SELECT count(*) FROM place_in_batch WHERE place_in_batch.org_key = chosen.org_key))}}
SELECT answer.*, NULL::bigint AS open_orgs, NULL::bigint AS chosen_orgs,
       NULL::text[] AS counted_orgs, NULL::double precision AS now_pass
FROM ({{claim_answer()}}) AS answer
UNION ALL
SELECT NULL::text, NULL::integer, NULL::text, NULL::timestamptz, NULL::text, NULL::text, NULL::jsonb, NULL::jsonb,
       NULL::integer, NULL::bigint,
       (SELECT coalesce(max(chosen.open_orgs), 0) FROM chosen),
       (SELECT count(*) FROM chosen),
       ARRAY(SELECT chosen.org_key FROM chosen
             WHERE chosen.counted
               AND EXISTS (SELECT 1 FROM place_in_batch WHERE place_in_batch.org_key = chosen.org_key)
             ORDER BY chosen.place),
       (SELECT clock.now_pass FROM clock);

-- name: runs_claim_queued_sole
-- The claim when one org alone has due queued runs and nobody counts it (no cap, start rate or keyed run queued), the queue's usual shape: its due keyless runs, priority then age, SKIP LOCKED, as runs_claim_queued_free would take them, without the turn (an org alone keeps none) and so without its reads (RUN-2, FSH-4). A last row (run_id null) says, as runs_claim_queued_free's does, how many orgs were open and chosen; its open_orgs null when the queue is not of that shape and nothing was claimed: the caller then claims with runs_claim_queued_free.
-- plan: generic
-- The rules are runs_claim_queued_free's for one org: a paused org alone is no open org; a cap (its own or the
-- default), a start rate or a keyed run queued makes it counted, which only the full claim serves.
WITH first_org AS MATERIALIZED (
    {{first_due_org()}}
), sole AS MATERIALIZED (
    SELECT first_org.org_key, coalesce(limits.paused, false) AS paused,
           ({{next_due_org(first_org.org_key)}}) IS NULL AS alone,
           coalesce(limits.max_active, %(default_max_active)s::integer) IS NULL
           AND limits.max_starts_per_minute IS NULL
           AND NOT {{keyed_run_queued(first_org.org_key)}} AS uncounted
    FROM first_org
    LEFT JOIN LATERAL (SELECT org_limit.paused, org_limit.max_active, org_limit.max_starts_per_minute
                       FROM __schema__.org_limits AS org_limit
                       WHERE org_limit.org_id = first_org.org_key LIMIT 1) AS limits ON true
), chosen AS MATERIALIZED (
    -- The org this claim serves, in the shape claim_picked reads (it keeps no turn here).
    SELECT sole.org_key, false AS counted, 1 AS weight, 0::double precision AS virtual_pass
    FROM sole
    WHERE sole.alone AND NOT sole.paused AND sole.uncounted
), picked AS MATERIALIZED (
    SELECT walk.run_id
    FROM chosen
    CROSS JOIN LATERAL (
        {{free_org_walk(chosen.org_key, %(limit)s::integer)}}
    ) AS walk
), {{claim_picked(false, false, 0)}}
SELECT answer.*, NULL::bigint AS open_orgs, NULL::bigint AS chosen_orgs,
       NULL::text[] AS counted_orgs, NULL::double precision AS now_pass
FROM ({{claim_answer()}}) AS answer
UNION ALL
SELECT NULL::text, NULL::integer, NULL::text, NULL::timestamptz, NULL::text, NULL::text, NULL::jsonb, NULL::jsonb,
       NULL::integer, NULL::bigint,
       CASE WHEN NOT EXISTS (SELECT 1 FROM sole) THEN 0
            WHEN (SELECT sole.alone AND sole.paused FROM sole) THEN 0
            WHEN EXISTS (SELECT 1 FROM chosen) THEN 1 END,
       (SELECT count(*) FROM chosen),
       '{}'::text[],
       NULL::double precision;
