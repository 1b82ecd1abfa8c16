-- name: compute_billing_claim
-- Lease due pending billing jobs, SKIP LOCKED (BIL-1).
-- plan: generic
-- Planned once: a scan of the pending-only due index fits every parameter, and planning it on every call cost
-- more than running it. The leased rows are found again by key (= ANY of the locked ids): joined to the CTE,
-- a generic plan (which guesses a tenth of the due jobs for an unknown limit) hashed the whole table instead.
WITH due AS (
    SELECT job.run_id FROM __schema__.compute_billing_jobs_v2 AS job
    WHERE job.status = 'pending' AND job.available_at <= coalesce(%(now)s::timestamptz, now())
      AND (job.lease_owner IS NULL OR job.lease_expires_at <= coalesce(%(now)s::timestamptz, now()))
    ORDER BY job.available_at, job.run_id
    LIMIT %(limit)s::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE __schema__.compute_billing_jobs_v2 AS job
SET lease_owner = %(lease_owner)s::text,
    lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::double precision),
    attempt_count = job.attempt_count + 1, updated_at = now()
WHERE job.run_id = ANY (ARRAY(SELECT due.run_id FROM due))
RETURNING job.run_id;

-- name: compute_billing_finalize
-- Turn terminal runs' runtime resources into billing items, idempotent by adjustment id, many jobs in one statement, each fenced on its own (pending, this worker's lease, its run terminal); a late resource (no billingEndedAt) waits for confirmed cleanup or its ceiling, then is billed at most timeoutSeconds + grace; one answer per given run, in input order (BIL-1).
-- plan: generic
WITH given AS MATERIALIZED (
    SELECT * FROM unnest(%(run_ids)s::text[]) WITH ORDINALITY AS given(run_id, position)
), job AS MATERIALIZED (
    SELECT job.run_id FROM __schema__.compute_billing_jobs_v2 AS job
    WHERE job.run_id IN (SELECT given.run_id FROM given) AND job.status = 'pending'
      AND job.lease_owner = %(lease_owner)s::text
    ORDER BY job.run_id
    FOR UPDATE
), clock AS MATERIALIZED (
    SELECT (extract(epoch FROM coalesce(%(now)s::timestamptz, clock_timestamp())) * 1000)::bigint AS now_ms
), billed_run AS MATERIALIZED (
    SELECT run.run_id, run.org_id, run.runtime_resources_json,
           CASE WHEN jsonb_typeof(run.launch_json #> '{contractSnapshot,sandbox,timeoutSeconds}') = 'number'
                THEN (run.launch_json #>> '{contractSnapshot,sandbox,timeoutSeconds}')::bigint
                ELSE %(default_timeout_seconds)s::bigint END AS timeout_seconds
    FROM __schema__.runs AS run
    JOIN job ON job.run_id = run.run_id
    WHERE run.status IN ('completed', 'failed', 'cancelled')
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
    UPDATE __schema__.compute_billing_jobs_v2 AS billing
    SET status = CASE WHEN waiting.until_ms IS NULL THEN 'finalized' ELSE 'pending' END,
        finalized_at = CASE WHEN waiting.until_ms IS NULL THEN now() END,
        -- A waiting job looks again within %(recheck_seconds)s even before its ceiling: a cleanup that confirmed
        -- after this statement's snapshot was taken, but whose nudge of available_at this write then replaced,
        -- would otherwise leave the run unbilled until its ceiling.
        available_at = CASE WHEN waiting.until_ms IS NULL THEN billing.available_at
                            ELSE to_timestamp(least(waiting.until_ms, clock.now_ms + %(recheck_seconds)s::bigint * 1000)
                                              / 1000.0) END,
        last_error = CASE WHEN waiting.until_ms IS NULL THEN NULL
                          ELSE 'late runtime resource waits for confirmed cleanup or its billing ceiling' END,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM waiting CROSS JOIN clock
    WHERE billing.run_id = waiting.run_id
    RETURNING billing.run_id, billing.status
)
SELECT given.run_id, settled_job.status,
       (SELECT count(*) FROM items WHERE items.run_id = given.run_id) AS items_written,
       waiting.until_ms AS waiting_until_ms
FROM given
LEFT JOIN settled_job ON settled_job.run_id = given.run_id
LEFT JOIN waiting ON waiting.run_id = given.run_id
ORDER BY given.position;
