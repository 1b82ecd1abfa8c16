-- Statements only the tests use: kept here so that no production path exists that only tests reach.

-- name: attempts_record_terminal
-- Record a runner terminal first-write-wins: never overwrite a result or its log payload; a synthetic loss also needs the exact heartbeat identity (TRM-1, TRM-2).
WITH target_attempt AS MATERIALIZED (
    SELECT attempt.run_id, attempt.attempt, attempt.lease_token
    FROM __schema__.attempts AS attempt
    WHERE attempt.run_id = %(run_id)s::text AND attempt.attempt = %(attempt)s::integer
), recorded AS (
    UPDATE __schema__.attempts AS target
    SET runner_result_json = coalesce(target.runner_result_json, %(result)s::jsonb),
        runner_log_payload_json = CASE
            WHEN target.runner_result_json IS NOT NULL THEN target.runner_log_payload_json
            WHEN EXISTS (
                SELECT 1 FROM __schema__.runs AS log_run
                WHERE log_run.run_id = target.run_id AND log_run.run_log_store = 'planet_scale'
            ) THEN %(log_payload)s::jsonb
            ELSE NULL
        END,
        runner_terminal_received_at = coalesce(target.runner_terminal_received_at, clock_timestamp()),
        updated_at = now()
    FROM target_attempt
    WHERE target.run_id = target_attempt.run_id
      AND target.attempt = target_attempt.attempt
      AND (%(lease_token)s::text IS NULL OR target.lease_token = %(lease_token)s::text)
      AND (
          NOT %(synthetic)s::boolean
          OR target.runner_result_json IS NOT NULL
          OR target.heartbeat_at IS NOT DISTINCT FROM %(expected_heartbeat_at)s::timestamptz
      )
    RETURNING target.runner_result_json = %(result)s::jsonb AS is_this_result
)
SELECT EXISTS (SELECT 1 FROM target_attempt) AS attempt_exists,
       coalesce((SELECT %(lease_token)s::text IS NULL OR target_attempt.lease_token = %(lease_token)s::text FROM target_attempt), false) AS lease_matches,
       EXISTS (SELECT 1 FROM recorded) AS recorded,
       coalesce((SELECT recorded.is_this_result FROM recorded), false) AS is_this_result;
