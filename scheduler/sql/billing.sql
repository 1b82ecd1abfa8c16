-- name: compute_billing_finalize_due
-- Lock up to `limit` due pending billing jobs no live lease holds (SKIP LOCKED) and, in the same statement, turn their terminal runs' runtime resources into billing items, idempotent by adjustment id; a late resource (no billingEndedAt) waits for confirmed cleanup or its ceiling, then is billed at most timeoutSeconds + grace; a job whose run is not terminal is leased for lease_seconds, as a claim would have; one answer per locked job, by run id (BIL-1).
-- plan: generic
-- One statement, so no lease is written between a claim and its finalize (issue 47: a commit and an update of
-- the job a run); a job an older release's worker leased is left to that lease. The locked jobs are found again
-- by key (= ANY of their ids): joined to the CTE, a generic plan (which guesses a tenth of the due jobs for an
-- unknown limit) hashed the whole table instead.
WITH job AS MATERIALIZED (
    SELECT job.run_id FROM __schema__.compute_billing_jobs_v2 AS job
    WHERE job.status = 'pending' AND job.available_at <= coalesce(%(now)s::timestamptz, now())
      AND (job.lease_owner IS NULL OR job.lease_expires_at <= coalesce(%(now)s::timestamptz, now()))
    ORDER BY job.available_at, job.run_id
    LIMIT %(limit)s::integer
    FOR UPDATE SKIP LOCKED
), clock AS MATERIALIZED (
    SELECT (extract(epoch FROM coalesce(%(now)s::timestamptz, clock_timestamp())) * 1000)::bigint AS now_ms
), billed_run AS MATERIALIZED (
    SELECT run.run_id, run.org_id, run.runtime_resources_json,
           CASE WHEN jsonb_typeof(run.launch_json #> '{contractSnapshot,sandbox,timeoutSeconds}') = 'number'
                THEN (run.launch_json #>> '{contractSnapshot,sandbox,timeoutSeconds}')::bigint
                ELSE %(default_timeout_seconds)s::bigint END AS timeout_seconds
    FROM __schema__.runs AS run
    WHERE run.run_id = ANY (ARRAY(SELECT job.run_id FROM job)) AND run.status IN ('completed', 'failed', 'cancelled')
), resources AS MATERIALIZED (
    SELECT billed_run.run_id, billed_run.org_id, item.resource,
           (item.resource ->> 'billingStartedAt')::bigint AS started_ms,
           CASE WHEN jsonb_typeof(item.resource -> 'billingEndedAt') = 'number'
                THEN (item.resource ->> 'billingEndedAt')::numeric END AS ended_ms,  -- CLN-5: may hold a fraction
           (item.resource ->> 'billingStartedAt')::bigint
               + (billed_run.timeout_seconds + %(grace_seconds)s::bigint) * 1000 AS ceiling_ms
    FROM billed_run
    CROSS JOIN LATERAL jsonb_array_elements(billed_run.runtime_resources_json) AS item(resource)
    WHERE jsonb_typeof(item.resource -> 'billingStartedAt') = 'number'
), waiting AS MATERIALIZED (
    -- Per run: the earliest ceiling of a late resource still inside it (none: the run is billed now).
    SELECT billed_run.run_id,
           min(resources.ceiling_ms) FILTER (WHERE resources.ended_ms IS NULL AND resources.ceiling_ms > clock.now_ms)
               AS until_ms
    FROM billed_run CROSS JOIN clock
    LEFT JOIN resources ON resources.run_id = billed_run.run_id
    GROUP BY billed_run.run_id
), items AS (
    INSERT INTO __schema__.billing_items (
        adjustment_session_id, run_id, org_id, kind, provider, sandbox_id, routing_domain,
        billing_started_at, billing_ended_at, duration_ms, cpu, memory_mb
    )
    SELECT CASE WHEN resources.ended_ms IS NOT NULL
                THEN resources.run_id || ':resource:' || coalesce(resources.resource ->> 'provider', '') || ':' || coalesce(resources.resource ->> 'sandboxId', '')
                ELSE resources.run_id || ':late-resource:' || encode(sha256(convert_to(
                         coalesce(resources.resource ->> 'provider', '') || '|' || coalesce(resources.resource ->> 'sandboxId', '')
                         || '|' || coalesce(resources.resource ->> 'routingDomain', '') || '|' || resources.started_ms, 'UTF8')), 'hex')
           END,
           resources.run_id, resources.org_id,
           CASE WHEN resources.ended_ms IS NOT NULL THEN 'resource' ELSE 'late_resource' END,
           coalesce(resources.resource ->> 'provider', 'unknown'), coalesce(resources.resource ->> 'sandboxId', ''),
           resources.resource ->> 'routingDomain',
           to_timestamp(resources.started_ms / 1000.0),
           to_timestamp(coalesce(resources.ended_ms, resources.ceiling_ms) / 1000.0),
           round(greatest(0, coalesce(resources.ended_ms, resources.ceiling_ms) - resources.started_ms))::bigint,
           CASE WHEN jsonb_typeof(resources.resource -> 'cpu') = 'number' THEN (resources.resource ->> 'cpu')::double precision END,
           CASE WHEN jsonb_typeof(resources.resource -> 'memoryMb') = 'number' THEN (resources.resource ->> 'memoryMb')::numeric::integer END
    FROM resources
    JOIN waiting ON waiting.run_id = resources.run_id AND waiting.until_ms IS NULL
    ON CONFLICT (adjustment_session_id) DO NOTHING
    RETURNING run_id
), settled_job AS (
    -- Each job's run looked up once, by key, in `waiting` (terminal when found; billed now when its until_ms is
    -- null): a row subquery, not a join, since a generic plan hashed the locked jobs for a join.
    UPDATE __schema__.compute_billing_jobs_v2 AS billing
    SET (status, finalized_at, available_at, last_error, lease_owner, lease_expires_at) = (
            SELECT CASE WHEN decided.billed THEN 'finalized' ELSE 'pending' END,
                   CASE WHEN decided.billed THEN now() END,
                   -- A waiting job looks again within %(recheck_seconds)s even before its ceiling: a cleanup that
                   -- confirmed after this statement's snapshot was taken, but whose nudge of available_at this
                   -- write then replaced, would otherwise leave the run unbilled until its ceiling.
                   CASE WHEN decided.until_ms IS NULL THEN billing.available_at
                        ELSE to_timestamp(least(decided.until_ms, clock.now_ms + %(recheck_seconds)s::bigint * 1000)
                                          / 1000.0) END,
                   CASE WHEN decided.until_ms IS NOT NULL
                        THEN 'late runtime resource waits for confirmed cleanup or its billing ceiling' END,
                   -- A run not terminal yet: leased, as a claim would have, so the next ticks leave it alone.
                   CASE WHEN NOT decided.terminal THEN %(lease_owner)s::text END,
                   CASE WHEN NOT decided.terminal
                        THEN now() + make_interval(secs => %(lease_seconds)s::double precision) END
            FROM (SELECT waiting.run_id IS NOT NULL AS terminal,
                         waiting.run_id IS NOT NULL AND waiting.until_ms IS NULL AS billed, waiting.until_ms
                  FROM (SELECT 1) AS one
                  LEFT JOIN waiting ON waiting.run_id = billing.run_id) AS decided),
        attempt_count = billing.attempt_count + 1, updated_at = now()
    FROM clock
    WHERE billing.run_id = ANY (ARRAY(SELECT job.run_id FROM job))
    RETURNING billing.run_id, billing.status
)
SELECT settled_job.run_id, CASE WHEN waiting.run_id IS NOT NULL THEN settled_job.status END AS status,
       (SELECT count(*) FROM items WHERE items.run_id = settled_job.run_id) AS items_written,
       waiting.until_ms AS waiting_until_ms
FROM settled_job
LEFT JOIN waiting ON waiting.run_id = settled_job.run_id
ORDER BY settled_job.run_id;
