-- Fragments of the outbox (OBX-3..6, OBX-10): the claim's CTEs, the acknowledgements, the built-in store.

-- fragment: acknowledge_facts(event_ids, lease_owner)
-- OBX-6: a delivered prefix is acknowledged: delivered, lease cleared, only on facts this drainer still holds.
UPDATE __schema__.outbox AS fact
SET delivered_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL
WHERE fact.event_id = ANY ({event_ids})
  AND fact.lease_owner = {lease_owner}
  AND fact.delivered_at IS NULL
RETURNING fact.event_id

-- fragment: acknowledge_unleased_facts(event_ids, lease_owner)
-- OBX-10: facts read under their run's lock and delivered in the same transaction: delivered, unless another
-- drainer holds a live lease on one (it then stays that drainer's to acknowledge).
UPDATE __schema__.outbox AS fact
SET delivered_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL
WHERE fact.event_id = ANY ({event_ids})
  AND fact.delivered_at IS NULL
  AND (fact.lease_owner IS NULL OR fact.lease_owner = {lease_owner} OR fact.lease_expires_at <= now())
RETURNING fact.event_id

-- fragment: live_lease(fact)
-- OBX-3: `fact` is under a live lease, whoever holds it; one anywhere in a run's lane holds the run.
{fact}.lease_owner IS NOT NULL AND {fact}.lease_expires_at > now()

-- fragment: claimable_prefixes(run_ids, lane)
-- OBX-3, OBX-5: the two CTEs of a claim under the runs' locks: `ranked` numbers each run's undelivered facts in
-- causal order; `eligible_runs` keeps the runs whose head is ready and whose lane no other drainer holds.
ranked AS MATERIALIZED (
    SELECT fact.event_id, fact.run_id, fact.event_type, fact.payload_json, fact.attempt_count, fact.failed_at,
           fact.next_attempt_at, fact.created_at,
           -- OBX-3: a live lease holds the run's lane whoever holds it, this drainer included.
           {{live_lease(fact)}} AS held,
           row_number() OVER (PARTITION BY fact.run_id ORDER BY fact.created_at, fact.event_id) AS position
    FROM __schema__.outbox AS fact
    WHERE fact.run_id = ANY ({run_ids}) AND fact.lane = {lane} AND fact.delivered_at IS NULL
), eligible_runs AS MATERIALIZED (
    SELECT ranked.run_id
    FROM ranked
    GROUP BY ranked.run_id
    HAVING NOT bool_or(ranked.held)
       AND NOT bool_or(ranked.position = 1 AND (ranked.failed_at IS NOT NULL
                                               OR coalesce(ranked.next_attempt_at, ranked.created_at) > now()))
)

-- fragment: store_ledger_events(source)
-- OBX-10: the built-in receiver stores ledger events idempotently by event id (source: event_id, run_id,
-- event_type, occurred_at, payload).
INSERT INTO __schema__.run_ledger_events (event_id, run_id, event_type, occurred_at, payload_json)
SELECT event.event_id, event.run_id, event.event_type, event.occurred_at, event.payload
FROM {source} AS event
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id

-- fragment: due_fact(fact)
-- OBX-2, OBX-3: `fact` is a fact of the lane that could be delivered now: undelivered, not failed, due (what a ready
-- head is of itself; the lane survey asks it of any fact).
{fact}.lane = %(lane)s::text AND {fact}.delivered_at IS NULL
AND {fact}.failed_at IS NULL
AND coalesce({fact}.next_attempt_at, {fact}.created_at) <= now()

-- fragment: ready_head(fact)
-- OBX-2, OBX-3: `fact` (a row of the outbox walked in age order) is its run's ready lane head: undelivered, not
-- failed, due, no older undelivered fact, no live lease in the lane. OFFSET 0 keeps each check a per-fact probe
-- by run_id: a queue's statistics are always stale, and turned into a join the check was planned as a scan of
-- every undelivered fact per candidate.
{{due_fact({fact})}}
AND NOT EXISTS (SELECT 1 FROM __schema__.outbox AS older
                WHERE older.run_id = {fact}.run_id AND older.lane = {fact}.lane AND older.delivered_at IS NULL
                  AND (older.created_at, older.event_id) < ({fact}.created_at, {fact}.event_id)
                OFFSET 0)
AND NOT EXISTS (SELECT 1 FROM __schema__.outbox AS active
                WHERE active.run_id = {fact}.run_id AND active.lane = {fact}.lane AND active.delivered_at IS NULL
                  AND {{live_lease(active)}}
                OFFSET 0)

-- fragment: ready_listing_heads()
-- OBX-4: the listing's head walks every order shares, inside its candidate_runs: the oldest admissions (class 0)
-- and the oldest ready heads (class 3, and oldest_ready).
    -- Class 0: a run.created fact is its run's head, so the oldest admissions are the oldest class-0 heads.
    (SELECT fact.run_id FROM __schema__.outbox AS fact
     WHERE %(admission_first)s::boolean
       AND fact.lane = %(lane)s::text AND fact.delivered_at IS NULL AND fact.event_type = 'run.created'
       AND NOT (fact.run_id = ANY (%(exclude_run_ids)s::text[]))
     ORDER BY fact.created_at, fact.event_id LIMIT %(limit)s::integer)
    UNION
    -- Every order: the oldest ready heads, so class 3 (and oldest_ready) is filled in head order.
    (SELECT fact.run_id FROM __schema__.outbox AS fact
     WHERE {{ready_head(fact)}}
     ORDER BY fact.created_at, fact.event_id LIMIT %(limit)s::integer + cardinality(%(exclude_run_ids)s::text[]))

-- fragment: ready_listing_order()
-- OBX-2..4: the listing's answer from its candidate_runs: each run's head, ready and not held (OBX-3), its class,
-- in the order asked for.
SELECT candidate_runs.run_id, head.event_type AS head_event_type, head.created_at AS head_created_at,
       kind.class
FROM candidate_runs
CROSS JOIN LATERAL (
    SELECT fact.event_type, fact.created_at, fact.failed_at, fact.next_attempt_at
    FROM __schema__.outbox AS fact
    WHERE fact.run_id = candidate_runs.run_id AND fact.lane = %(lane)s::text AND fact.delivered_at IS NULL
    ORDER BY fact.created_at, fact.event_id
    LIMIT 1
) AS head
-- One pass over the run's pending facts gives its class and whether a live lease holds its lane (OBX-3, whoever
-- holds it): the pass an EXISTS per question made three times, and a third of the planning, which this statement
-- pays on every call.
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN head.event_type = 'run.created' THEN 0
        WHEN bool_or(pending.event_type IN ('run.completed', 'run.failed', 'run.cancelled')) THEN 1
        WHEN %(lane)s::text = 'ledger' AND bool_or(pending.event_type = 'run.waiting') THEN 2
        ELSE 3
    END AS class,
    bool_or({{live_lease(pending)}}) AS held
    FROM __schema__.outbox AS pending
    WHERE pending.run_id = candidate_runs.run_id AND pending.lane = %(lane)s::text AND pending.delivered_at IS NULL
) AS kind
WHERE NOT (candidate_runs.run_id = ANY (%(exclude_run_ids)s::text[]))
  AND head.failed_at IS NULL AND coalesce(head.next_attempt_at, head.created_at) <= now()
  AND NOT kind.held
ORDER BY CASE WHEN %(admission_first)s::boolean THEN kind.class ELSE 0 END, head.created_at, candidate_runs.run_id
LIMIT %(limit)s::integer

-- fragment: ready_listing_small_classes()
-- OBX-4: admission_first classes 1 and 2, exactly: every run of a small class (the caller's flags say which) is a
-- candidate, a probe of the milestone index each, so the order inside it is by each head's own age, never the
-- milestone's.
    (SELECT DISTINCT fact.run_id
     FROM __schema__.outbox AS fact
     WHERE %(enumerate_terminals)s::boolean
       AND fact.lane = %(lane)s::text AND fact.delivered_at IS NULL
       AND fact.event_type IN ('run.completed', 'run.failed', 'run.cancelled')
       AND NOT (fact.run_id = ANY (%(exclude_run_ids)s::text[])))
    UNION ALL
    (SELECT DISTINCT fact.run_id
     FROM __schema__.outbox AS fact
     WHERE %(enumerate_waits)s::boolean
       AND fact.lane = %(lane)s::text AND fact.delivered_at IS NULL AND fact.event_type = 'run.waiting'
       AND NOT (fact.run_id = ANY (%(exclude_run_ids)s::text[])))

-- fragment: class_head_walk(walking, event_types)
-- OBX-4: a large class's candidates: the oldest ready heads whose run holds a pending fact of `event_types`,
-- walked in head order until the limit is met (when `walking`; pruned at planning otherwise).
(SELECT head.run_id FROM __schema__.outbox AS head
 WHERE {walking}
   AND {{ready_head(head)}}
   AND EXISTS (SELECT 1 FROM __schema__.outbox AS pending
               WHERE pending.run_id = head.run_id AND pending.lane = head.lane AND pending.delivered_at IS NULL
                 AND pending.event_type IN {event_types}
               OFFSET 0)
   AND NOT (head.run_id = ANY (%(exclude_run_ids)s::text[]))
 ORDER BY head.created_at, head.event_id LIMIT %(limit)s::integer)

-- fragment: lane_survey()
-- OBX-4 (issue 47): the lane survey's answer (outbox_survey_lane says what each column is for).
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM __schema__.outbox AS fact
            WHERE %(admission_first)s::boolean
              AND fact.lane = %(lane)s::text AND fact.delivered_at IS NULL
              AND fact.event_type IN ('run.completed', 'run.failed', 'run.cancelled')
            LIMIT %(bound)s::integer + 1) AS bounded) AS terminals,
       (SELECT count(*) FROM (
            SELECT 1 FROM __schema__.outbox AS fact
            WHERE %(admission_first)s::boolean AND %(lane)s::text = 'ledger'
              AND fact.lane = %(lane)s::text AND fact.delivered_at IS NULL AND fact.event_type = 'run.waiting'
            LIMIT %(bound)s::integer + 1) AS bounded) AS waits,
       -- Each condition is one a ready head meets itself (ready_head): a necessary condition, so "none" is exact.
       -- Walked in the ready index's order (an EXISTS would drop the order): whatever the statistics, a walk of
       -- the undelivered facts from the oldest, never a scan of the delivered history.
       coalesce((SELECT true FROM __schema__.outbox AS fact
                 WHERE {{due_fact(fact)}}
                   AND NOT ({{live_lease(fact)}})
                 ORDER BY fact.lane, fact.created_at, fact.event_id LIMIT 1), false) AS any_ready,
       -- A plan is costed for the pages its relations had when it was made, at least those the statistics
       -- counted (a change of statistics discards it); within twice those, its costs are within that factor.
       (SELECT coalesce(bool_and(pg_catalog.pg_relation_size(rel.oid)
                                 <= (2 * rel.relpages::bigint + 8) * pg_catalog.current_setting('block_size')::bigint),
                        false)
        FROM pg_catalog.pg_class AS rel
        WHERE rel.oid = ANY (ARRAY(SELECT pg_catalog.to_regclass('__schema__.outbox')::oid
                                   UNION ALL
                                   SELECT ind.indexrelid FROM pg_catalog.pg_index AS ind
                                   WHERE ind.indrelid = pg_catalog.to_regclass('__schema__.outbox')))) AS statistics_fit

-- fragment: ready_listing()
-- OBX-2..4: the usual listing (every terminal and wait class small enough to list whole), in both its plan forms.
WITH candidate_runs AS (
{{ready_listing_small_classes()}}
    UNION
{{ready_listing_heads()}}
)
{{ready_listing_order()}}
