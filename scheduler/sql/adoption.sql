-- name: sandbox_cleanup_adoption_preflight
-- Cheap proof of adoption work: any non-deleted legacy row, or any non-deleted v2 daytona row with a null routing domain (CLN-2).
-- plan: any
-- No parameter, so every mode plans it alike: run in the connection's mode, a sweep tick sends no mode switch
-- before it and none back before its claim (two statements of an idle tick's four, issue 47).
SELECT EXISTS (
           SELECT 1 FROM __schema__.sandbox_cleanup_jobs_v2
           WHERE provider = 'daytona' AND routing_domain IS NULL AND status <> 'deleted'
       ) OR EXISTS (
           SELECT 1 FROM __schema__.sandbox_cleanup_jobs WHERE status <> 'deleted'
       ) AS pending;

-- name: sandbox_cleanup_adopt
-- Adoption repair in one statement (CLN-3): settle confirmed null-domain duplicates, mark proven legacy rows deleted (after the v2 settle: completion locks v2 before legacy), copy every other pending legacy row into v2.
WITH pending_legacy AS MATERIALIZED (
    SELECT sandbox_id, run_id, attempt, environment, routing_domain, attempt_count, failure_count,
           available_at, last_error, created_at, blocked_at, block_reason, status
    FROM __schema__.sandbox_cleanup_jobs
    WHERE status <> 'deleted'
), unresolved_null_domain AS MATERIALIZED (
    SELECT sandbox_id, run_id, attempt, environment FROM __schema__.sandbox_cleanup_jobs_v2
    WHERE provider = 'daytona' AND routing_domain IS NULL AND status <> 'deleted'
    UNION
    SELECT sandbox_id, run_id, attempt, environment FROM pending_legacy WHERE routing_domain IS NULL
), confirmed_null_domain AS MATERIALIZED (
    -- (a) a deleted daytona tombstone with a domain and its confirmation prove the null-domain original.
    SELECT tombstone.sandbox_id, tombstone.run_id, tombstone.attempt, tombstone.environment,
           min(coalesce(tombstone.deleted_at, confirmation.created_at)) AS confirmed_deleted_at
    FROM unresolved_null_domain AS original
    JOIN __schema__.sandbox_cleanup_jobs_v2 AS tombstone
      ON tombstone.sandbox_id = original.sandbox_id AND tombstone.run_id = original.run_id
     AND tombstone.attempt = original.attempt AND tombstone.environment = original.environment
    JOIN __schema__.sandbox_cleanup_events_v2 AS confirmation
      ON confirmation.provider = tombstone.provider AND confirmation.sandbox_id = tombstone.sandbox_id
     AND confirmation.run_id = tombstone.run_id AND confirmation.attempt = tombstone.attempt
     AND confirmation.routing_domain IS NULL
     AND confirmation.event_type = 'provider_delete_confirmed'
     AND confirmation.details_json ->> 'providerOutcome' = 'deleted'
     AND confirmation.details_json ->> 'routingDomain' = tombstone.routing_domain
    WHERE tombstone.provider = 'daytona' AND tombstone.status = 'deleted' AND tombstone.routing_domain IS NOT NULL
    GROUP BY tombstone.sandbox_id, tombstone.run_id, tombstone.attempt, tombstone.environment
), settled_duplicate AS (
    UPDATE __schema__.sandbox_cleanup_jobs_v2 AS duplicate
    SET status = 'deleted', deleted_at = confirmed.confirmed_deleted_at,
        lease_owner = NULL, lease_expires_at = NULL, last_error = NULL, updated_at = clock_timestamp()
    FROM confirmed_null_domain AS confirmed
    WHERE duplicate.provider = 'daytona' AND duplicate.routing_domain IS NULL AND duplicate.status <> 'deleted'
      AND duplicate.sandbox_id = confirmed.sandbox_id AND duplicate.run_id = confirmed.run_id
      AND duplicate.attempt = confirmed.attempt AND duplicate.environment = confirmed.environment
    RETURNING duplicate.sandbox_id
), proven_legacy AS MATERIALIZED (
    -- (b) proven by a v2 tombstone of its exact identity and domain, or null-domain and confirmed by (a).
    SELECT legacy.sandbox_id, legacy.run_id, legacy.attempt, legacy.environment, legacy.routing_domain,
           coalesce(
               (SELECT tombstone.deleted_at FROM __schema__.sandbox_cleanup_jobs_v2 AS tombstone
                WHERE tombstone.provider = 'daytona' AND tombstone.status = 'deleted'
                  AND tombstone.sandbox_id = legacy.sandbox_id AND tombstone.run_id = legacy.run_id
                  AND tombstone.attempt = legacy.attempt AND tombstone.environment = legacy.environment
                  AND tombstone.routing_domain IS NOT DISTINCT FROM legacy.routing_domain
                LIMIT 1),
               (SELECT confirmed.confirmed_deleted_at FROM confirmed_null_domain AS confirmed
                WHERE legacy.routing_domain IS NULL
                  AND confirmed.sandbox_id = legacy.sandbox_id AND confirmed.run_id = legacy.run_id
                  AND confirmed.attempt = legacy.attempt AND confirmed.environment = legacy.environment),
               (SELECT min(confirmation.created_at) FROM __schema__.sandbox_cleanup_events_v2 AS confirmation
                WHERE confirmation.provider = 'daytona' AND confirmation.sandbox_id = legacy.sandbox_id
                  AND confirmation.run_id = legacy.run_id AND confirmation.attempt = legacy.attempt
                  AND confirmation.routing_domain IS NOT DISTINCT FROM legacy.routing_domain
                  AND confirmation.event_type = 'provider_delete_confirmed'
                  AND confirmation.details_json ->> 'providerOutcome' IN ('deleted', 'already_absent')
                  AND confirmation.details_json ->> 'routingDomain' IS NOT DISTINCT FROM legacy.routing_domain)
           ) AS confirmed_deleted_at
    FROM pending_legacy AS legacy
    WHERE EXISTS (
              SELECT 1 FROM __schema__.sandbox_cleanup_jobs_v2 AS tombstone
              WHERE tombstone.provider = 'daytona' AND tombstone.status = 'deleted'
                AND tombstone.sandbox_id = legacy.sandbox_id AND tombstone.run_id = legacy.run_id
                AND tombstone.attempt = legacy.attempt AND tombstone.environment = legacy.environment
                AND tombstone.routing_domain IS NOT DISTINCT FROM legacy.routing_domain
          )
       OR (legacy.routing_domain IS NULL AND EXISTS (
              SELECT 1 FROM confirmed_null_domain AS confirmed
              WHERE confirmed.sandbox_id = legacy.sandbox_id AND confirmed.run_id = legacy.run_id
                AND confirmed.attempt = legacy.attempt AND confirmed.environment = legacy.environment
          ))
), settled_legacy AS (
    -- (c) after the v2 settle, so adopters take v2 locks before legacy ones, as completion does.
    UPDATE __schema__.sandbox_cleanup_jobs AS legacy
    SET status = 'deleted', deleted_at = coalesce(proven.confirmed_deleted_at, legacy.deleted_at),
        lease_owner = NULL, lease_expires_at = NULL, last_error = NULL, updated_at = clock_timestamp()
    FROM proven_legacy AS proven
    CROSS JOIN (SELECT count(*) FROM settled_duplicate) AS v2_first
    WHERE legacy.sandbox_id = proven.sandbox_id AND legacy.run_id = proven.run_id
      AND legacy.attempt = proven.attempt AND legacy.environment = proven.environment
      AND legacy.routing_domain IS NOT DISTINCT FROM proven.routing_domain
    RETURNING legacy.sandbox_id
), unproven_legacy AS (
    -- (d) every other pending legacy row becomes a v2 daytona obligation, its state copied.
    SELECT 'daytona'::text AS provider, legacy.sandbox_id, legacy.run_id, legacy.attempt, legacy.environment,
           legacy.routing_domain, legacy.status, legacy.attempt_count, legacy.failure_count, legacy.available_at,
           legacy.last_error, legacy.created_at, legacy.blocked_at, legacy.block_reason
    FROM pending_legacy AS legacy
    WHERE NOT EXISTS (
        SELECT 1 FROM proven_legacy AS proven
        WHERE proven.sandbox_id = legacy.sandbox_id AND proven.run_id = legacy.run_id
          AND proven.attempt = legacy.attempt AND proven.environment = legacy.environment
          AND proven.routing_domain IS NOT DISTINCT FROM legacy.routing_domain
    )
), copied AS (
    {{cleanup_obligations_insert(unproven_legacy)}}
)
SELECT (SELECT count(*) FROM settled_duplicate) AS settled_duplicates,
       (SELECT count(*) FROM settled_legacy) AS settled_legacy,
       (SELECT count(*) FROM copied) AS copied;
