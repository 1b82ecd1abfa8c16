-- name: sandbox_cleanup_claim
-- Lease due, unblocked, unleased-or-expired v2 obligations of the given providers, SKIP LOCKED, counting an attempt (CLN-4), each with whether the provider already accepted its delete (CLN-5); a job whose delete is still to ask for gets its provider_delete_requested event in the same statement.
-- plan: generic
-- One ordered walk of the due index per wanted provider (a LATERAL each, ordered by the index's own columns), so
-- the one generic plan reads at most `limit` due jobs per provider however many are due or backed off, instead
-- of planning per call (0.2 ms on every poll): with `provider = ANY`, or a tie-break the index lacks, a generic
-- plan reads and sorts every due job first.
WITH wanted AS (
    SELECT DISTINCT wanted.provider FROM unnest(%(providers)s::text[]) AS wanted(provider)
), due AS MATERIALIZED (
    SELECT job.row_id
    FROM wanted
    CROSS JOIN LATERAL (
        SELECT candidate.ctid AS row_id, candidate.sandbox_id, candidate.available_at
        FROM __schema__.sandbox_cleanup_jobs_v2 AS candidate
        WHERE candidate.status = 'pending'
          AND candidate.provider = wanted.provider
          AND candidate.available_at <= coalesce(%(now)s::timestamptz, now())
          AND (candidate.lease_owner IS NULL OR candidate.lease_expires_at <= coalesce(%(now)s::timestamptz, now()))
        ORDER BY candidate.available_at
        LIMIT %(limit)s::integer
        FOR UPDATE SKIP LOCKED
    ) AS job
    ORDER BY job.available_at, job.sandbox_id
    LIMIT %(limit)s::integer
), leased AS (
    UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
    SET lease_owner = %(lease_owner)s::text,
        lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::double precision),
        attempt_count = job.attempt_count + 1,
        updated_at = now()
    -- The locked rows by their row ids (a TID scan, whatever the statistics): joined to the CTE by key, a
    -- generic plan (which guesses a tenth of the due jobs for an unknown limit) may hash the whole table. A row
    -- updated meanwhile is no longer at its id, and is left for the next claim.
    WHERE job.ctid = ANY (ARRAY(SELECT due.row_id FROM due))
    RETURNING job.provider, job.sandbox_id, job.run_id, job.attempt, job.environment, job.routing_domain,
              job.attempt_count, job.failure_count, job.available_at,
              -- Whether the provider already took this job's delete (CLN-5): the sweep then only reads back.
              EXISTS (SELECT 1 FROM __schema__.sandbox_cleanup_events_v2 AS event
                      WHERE event.sandbox_id = job.sandbox_id AND event.run_id = job.run_id AND event.attempt = job.attempt
                        AND event.event_type = 'provider_delete_accepted'
                        AND event.provider = job.provider
                        AND event.routing_domain IS NOT DISTINCT FROM job.routing_domain) AS delete_accepted
), requested AS (
    -- The sweep asks the provider for these deletes next: the intent is on record before any call.
    INSERT INTO __schema__.sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain, event_type, details_json)
    SELECT leased.provider || ':' || leased.sandbox_id || ':provider_delete_requested:' || replace(gen_random_uuid()::text, '-', ''),
           leased.provider, leased.sandbox_id, leased.run_id, leased.attempt, leased.routing_domain,
           'provider_delete_requested', jsonb_build_object('routingDomain', leased.routing_domain)
    FROM leased
    WHERE NOT leased.delete_accepted
)
SELECT leased.provider, leased.sandbox_id, leased.run_id, leased.attempt, leased.environment, leased.routing_domain,
       leased.attempt_count, leased.failure_count, leased.delete_accepted
FROM leased
ORDER BY leased.available_at, leased.sandbox_id;

-- name: sandbox_cleanup_record_event
-- Append one cleanup event (accepted or failed; the claim records requested) for a job's identity.
INSERT INTO __schema__.sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain, event_type, details_json)
VALUES (%(event_id)s::text, %(provider)s::text, %(sandbox_id)s::text, %(run_id)s::text, %(attempt)s::integer,
        %(routing_domain)s::text, %(event_type)s::text, %(details)s::jsonb)
ON CONFLICT (event_id) DO NOTHING;

-- name: sandbox_cleanup_read_acceptance
-- The first delete the provider accepted for this job, by time then event id, in epoch milliseconds with its sub-millisecond part (CLN-5): the admin's cleanup page shows it between claims.
SELECT extract(epoch FROM event.created_at) * 1000 AS accepted_at_ms,
       event.details_json ->> 'routingDomain' AS organization_id
FROM __schema__.sandbox_cleanup_events_v2 AS event
WHERE event.run_id = %(run_id)s::text AND event.attempt = %(attempt)s::integer
  AND event.provider = %(provider)s::text AND event.sandbox_id = %(sandbox_id)s::text
  AND event.routing_domain IS NOT DISTINCT FROM %(routing_domain)s::text
  AND event.event_type = 'provider_delete_accepted'
ORDER BY event.created_at, event.event_id
LIMIT 1;

-- name: sandbox_cleanup_complete
-- Provider-confirmed completion of many jobs in one statement (CLN-6), each under its run's custody lock and its job's full identity, fenced on its own (this worker's lease, still pending): tombstone at the first acceptance, billingEndedAt, confirmation event, legacy completion for daytona; one outcome per item, in input order. Items name distinct jobs; runs are locked in run_id order, then jobs, so batches never deadlock.
-- plan: generic
WITH item AS MATERIALIZED (
    SELECT *
    FROM unnest(%(providers)s::text[], %(sandbox_ids)s::text[], %(run_ids)s::text[], %(attempts)s::integer[],
                %(routing_domains)s::text[], %(provider_outcomes)s::text[], %(observed_routing_domains)s::text[],
                %(event_ids)s::text[])
         WITH ORDINALITY AS item(provider, sandbox_id, run_id, attempt, routing_domain, provider_outcome,
                                 observed_routing_domain, event_id, position)
), custody AS MATERIALIZED (
    SELECT run.run_id FROM __schema__.runs AS run
    WHERE run.run_id IN (SELECT item.run_id FROM item)
    ORDER BY run.run_id
    FOR NO KEY UPDATE
), current_job AS MATERIALIZED (
    SELECT item.position, job.status, job.lease_owner, job.environment
    FROM __schema__.sandbox_cleanup_jobs_v2 AS job
    JOIN item ON job.provider = item.provider AND job.sandbox_id = item.sandbox_id
             AND job.run_id = item.run_id AND job.attempt = item.attempt
             AND job.routing_domain IS NOT DISTINCT FROM item.routing_domain
    CROSS JOIN (SELECT count(*) FROM custody) AS custody_first
    ORDER BY job.run_id, job.provider, job.sandbox_id
    FOR UPDATE OF job
), outcome AS MATERIALIZED (
    SELECT item.*, current_job.environment,
           CASE
               WHEN current_job.position IS NULL THEN
                   CASE WHEN EXISTS (
                       SELECT 1 FROM __schema__.sandbox_cleanup_jobs_v2 AS other
                       WHERE other.provider = item.provider AND other.sandbox_id = item.sandbox_id
                         AND other.run_id = item.run_id AND other.attempt = item.attempt
                   ) THEN 'wrong_routing_domain' ELSE 'missing_obligation' END
               WHEN current_job.status = 'deleted' THEN 'already_deleted'
               WHEN current_job.lease_owner IS DISTINCT FROM %(lease_owner)s::text THEN 'lease_lost'
               ELSE 'completed'
           END AS outcome,
           coalesce((SELECT min(event.created_at)
                     FROM __schema__.sandbox_cleanup_events_v2 AS event
                     WHERE event.run_id = item.run_id AND event.attempt = item.attempt
                       AND event.provider = item.provider AND event.sandbox_id = item.sandbox_id
                       AND event.routing_domain IS NOT DISTINCT FROM item.routing_domain
                       AND event.event_type = 'provider_delete_accepted'), clock_timestamp()) AS ended_at
    FROM item
    LEFT JOIN current_job ON current_job.position = item.position
), tombstone AS (
    UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
    SET status = 'deleted',
        deleted_at = outcome.ended_at,
        delete_confirmed_at = clock_timestamp(),
        routing_domain = coalesce(job.routing_domain, nullif(outcome.observed_routing_domain, '')),
        lease_owner = NULL, lease_expires_at = NULL, last_error = NULL, updated_at = clock_timestamp()
    FROM outcome
    WHERE outcome.outcome = 'completed'
      AND job.provider = outcome.provider AND job.sandbox_id = outcome.sandbox_id
      AND job.run_id = outcome.run_id AND job.attempt = outcome.attempt
      AND job.routing_domain IS NOT DISTINCT FROM outcome.routing_domain
    -- With what the later writes need of the item: its attempt, original domain (the job's; the provider may have
    -- filled the tombstone's), acceptance time, confirmation event id and legacy environment.
    RETURNING job.provider, job.sandbox_id, job.run_id, job.routing_domain, outcome.attempt,
              outcome.routing_domain AS item_routing_domain, outcome.ended_at, outcome.event_id,
              outcome.provider_outcome, outcome.environment
), billing_end AS (
    -- Billing ends when the provider accepted the delete, not when the read-back confirmed it; every sandbox of a
    -- run completed in this batch ends in the one update of its run.
    UPDATE __schema__.runs AS run
    SET runtime_resources_json = (
            SELECT coalesce(jsonb_agg(CASE
                       WHEN ended.ended_at IS NOT NULL AND NOT resource ? 'billingEndedAt'
                       -- CLN-5: epoch milliseconds with the acceptance's sub-millisecond part, as the seed writes it.
                       THEN resource || jsonb_build_object('billingEndedAt', extract(epoch FROM ended.ended_at) * 1000)
                       ELSE resource END ORDER BY position), '[]'::jsonb)
            FROM jsonb_array_elements(run.runtime_resources_json) WITH ORDINALITY AS element(resource, position)
            LEFT JOIN LATERAL (
                SELECT min(tombstone.ended_at) AS ended_at
                FROM tombstone
                WHERE tombstone.run_id = run.run_id AND element.resource ->> 'sandboxId' = tombstone.sandbox_id
                  AND coalesce(element.resource ->> 'provider', tombstone.provider) = tombstone.provider
            ) AS ended ON true
        ),
        updated_at = now()
    WHERE run.run_id IN (SELECT tombstone.run_id FROM tombstone)
), confirmation AS (
    INSERT INTO __schema__.sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain, event_type, details_json)
    SELECT tombstone.event_id, tombstone.provider, tombstone.sandbox_id, tombstone.run_id, tombstone.attempt,
           tombstone.item_routing_domain, 'provider_delete_confirmed',
           jsonb_build_object('providerOutcome', tombstone.provider_outcome, 'routingDomain', tombstone.routing_domain)
    FROM tombstone
    ON CONFLICT (event_id) DO NOTHING
), billing_nudge AS (
    -- A late resource that just got its end time need not wait for its ceiling.
    UPDATE __schema__.compute_billing_jobs_v2 AS billing
    SET available_at = least(billing.available_at, now())
    WHERE billing.run_id IN (SELECT tombstone.run_id FROM tombstone) AND billing.status = 'pending'
), legacy_completion AS (
    UPDATE __schema__.sandbox_cleanup_jobs AS legacy
    SET status = 'deleted', deleted_at = coalesce(legacy.deleted_at, clock_timestamp()),
        lease_owner = NULL, lease_expires_at = NULL, last_error = NULL, updated_at = clock_timestamp()
    FROM tombstone
    WHERE tombstone.provider = 'daytona'
      AND legacy.sandbox_id = tombstone.sandbox_id AND legacy.run_id = tombstone.run_id
      AND legacy.attempt = tombstone.attempt AND legacy.environment = tombstone.environment
      -- The confirmation's original routing domain (the job's, null for a null-domain job), not the one the
      -- provider's answer filled into the tombstone: a null-domain legacy row is settled too.
      AND legacy.routing_domain IS NOT DISTINCT FROM tombstone.item_routing_domain
      AND legacy.status <> 'deleted'
)
SELECT outcome.outcome, outcome.ended_at FROM outcome ORDER BY outcome.position;

-- name: sandbox_cleanup_fail
-- A failed delete (CLN-7): back off, or block with a reason when permanent or past the limit; the lease is returned.
UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
SET failure_count = job.failure_count + 1,
    last_error = %(error)s::text,
    available_at = now() + %(backoff_ms)s::double precision * interval '1 millisecond',
    status = CASE WHEN %(permanent)s::boolean OR job.failure_count + 1 >= %(max_failures)s::integer THEN 'blocked' ELSE job.status END,
    blocked_at = CASE WHEN %(permanent)s::boolean OR job.failure_count + 1 >= %(max_failures)s::integer THEN now() END,
    block_reason = CASE WHEN %(permanent)s::boolean OR job.failure_count + 1 >= %(max_failures)s::integer THEN %(error)s::text END,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE job.provider = %(provider)s::text AND job.sandbox_id = %(sandbox_id)s::text
  AND job.routing_domain IS NOT DISTINCT FROM %(routing_domain)s::text
  AND job.lease_owner = %(lease_owner)s::text AND job.status = 'pending'
RETURNING job.status;

-- name: sandbox_cleanup_retry_later
-- The provider took the delete but the read-back still sees the sandbox: look again later, without counting a failure.
UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
SET available_at = now() + %(delay_ms)s::double precision * interval '1 millisecond',
    lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE job.provider = %(provider)s::text AND job.sandbox_id = %(sandbox_id)s::text
  AND job.routing_domain IS NOT DISTINCT FROM %(routing_domain)s::text
  AND job.lease_owner = %(lease_owner)s::text AND job.status = 'pending'
RETURNING job.sandbox_id;

-- name: sandbox_cleanup_accepted_look_later
-- CLN-5 for a provider whose deletes finish after they are accepted (Daytona), for the acceptances that arrived together (issue 47): each acceptance on record (the time billing ends) and, for each job this worker still holds, the read-back due after delay_ms with the lease returned, in one statement: a read-back at once would only see the sandbox still there. Each job is fenced on its own; one row per item, in input order, saying whether its look was set. Items name distinct jobs; jobs are locked in one order, so batches never deadlock.
-- plan: generic
WITH item AS MATERIALIZED (
    SELECT *
    FROM unnest(%(providers)s::text[], %(sandbox_ids)s::text[], %(run_ids)s::text[], %(attempts)s::integer[],
                %(routing_domains)s::text[], %(event_ids)s::text[], %(details)s::jsonb[])
         WITH ORDINALITY AS item(provider, sandbox_id, run_id, attempt, routing_domain, event_id, details, position)
), accepted AS (
    INSERT INTO __schema__.sandbox_cleanup_events_v2 (event_id, provider, sandbox_id, run_id, attempt, routing_domain, event_type, details_json)
    SELECT item.event_id, item.provider, item.sandbox_id, item.run_id, item.attempt, item.routing_domain,
           'provider_delete_accepted', item.details
    FROM item
    ORDER BY item.position
    ON CONFLICT (event_id) DO NOTHING
), held AS MATERIALIZED (
    SELECT job.provider, job.sandbox_id, job.run_id, job.attempt, job.routing_domain, item.position
    FROM __schema__.sandbox_cleanup_jobs_v2 AS job
    JOIN item ON job.provider = item.provider AND job.sandbox_id = item.sandbox_id
             AND job.run_id = item.run_id AND job.attempt = item.attempt
             AND job.routing_domain IS NOT DISTINCT FROM item.routing_domain
    WHERE job.lease_owner = %(lease_owner)s::text AND job.status = 'pending'
    ORDER BY job.run_id, job.provider, job.sandbox_id
    FOR UPDATE OF job
), looked AS (
    UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
    SET available_at = now() + %(delay_ms)s::double precision * interval '1 millisecond',
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM held
    WHERE job.provider = held.provider AND job.sandbox_id = held.sandbox_id
      AND job.run_id = held.run_id AND job.attempt = held.attempt
      AND job.routing_domain IS NOT DISTINCT FROM held.routing_domain
    RETURNING held.position
)
SELECT item.position, looked.position IS NOT NULL AS looks_later
FROM item
LEFT JOIN looked ON looked.position = item.position
ORDER BY item.position;

-- name: sandbox_cleanup_unblock
-- Operator repair (CLN-7): a blocked job becomes pending and due now, its failure count reset.
UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
SET status = 'pending', blocked_at = NULL, block_reason = NULL, failure_count = 0, available_at = now(), updated_at = now()
WHERE job.provider = %(provider)s::text AND job.sandbox_id = %(sandbox_id)s::text
  AND job.routing_domain_key = coalesce(%(routing_domain)s::text, '') AND job.status = 'blocked'
RETURNING job.sandbox_id;
