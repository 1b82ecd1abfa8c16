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

-- name: attempts_settle
-- Record a runner terminal first-write-wins (TRM-1/TRM-2) and, when the attempt is current, settle it in the same statement: attempt, run (terminal or queued for a retry), billing job, cleanup obligation, progress and terminal facts (TRM-4, TRM-5). With a null result it only settles what is recorded.
WITH locked_run AS MATERIALIZED (
    -- Run lock before attempt lock, as every writer of both takes them.
    SELECT run.run_id, run.status, run.max_attempts, run.launch_json, run.suspension_json,
           run.run_log_store = 'planet_scale' AS keeps_log_payload
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
    FOR NO KEY UPDATE
), target AS MATERIALIZED (
    SELECT attempt.run_id, attempt.attempt, attempt.status, attempt.runner_result_json AS prior_result,
           attempt.runner_log_payload_json AS prior_log_payload,
           locked_run.launch_json, locked_run.suspension_json, locked_run.max_attempts, locked_run.keeps_log_payload,
           (%(lease_token)s::text IS NULL OR attempt.lease_token = %(lease_token)s::text) AS lease_matches,
           attempt.runner_result_json IS NULL
               AND attempt.status NOT IN ('completed', 'failed')
               AND %(result)s::jsonb IS NOT NULL
               AND (NOT %(synthetic)s::boolean
                    OR attempt.heartbeat_at IS NOT DISTINCT FROM %(expected_heartbeat_at)s::timestamptz) AS records_now,
           attempt.status IN ('claimed', 'running', 'waiting')
               AND locked_run.status IN ('queued', 'running', 'waiting')
               AND NOT EXISTS (
                   SELECT 1 FROM __schema__.attempts AS newer
                   WHERE newer.run_id = attempt.run_id AND newer.attempt > attempt.attempt
                     AND newer.status IN ('claimed', 'running', 'waiting', 'completed', 'failed')
               ) AS current
    FROM __schema__.attempts AS attempt
    JOIN locked_run ON locked_run.run_id = attempt.run_id
    WHERE attempt.attempt = %(attempt)s::integer
    FOR NO KEY UPDATE OF attempt
), recorded AS MATERIALIZED (
    SELECT target.*,
           CASE WHEN target.records_now AND target.lease_matches THEN %(result)s::jsonb ELSE target.prior_result END AS result
    FROM target
), verdict AS MATERIALIZED (
    SELECT recorded.*,
           CASE
               WHEN recorded.result ->> 'status' = 'completed' THEN 'completed'
               WHEN EXISTS (
                   SELECT 1 FROM __schema__.control AS cancel
                   WHERE cancel.key = 'runtime_cancel:' || recorded.run_id
               ) THEN 'cancelled'
               WHEN recorded.result -> 'error' ->> 'code' = ANY (%(retryable_codes)s::text[])
                    AND recorded.attempt < recorded.max_attempts THEN 'retry'
               ELSE 'failed'
           END AS outcome
    FROM recorded
    WHERE recorded.current
      AND recorded.lease_matches
      AND recorded.result ->> 'status' IN ('completed', 'failed')
), fact_clock AS MATERIALIZED (
    -- One base time for every fact this statement writes, so their order is causal.
    SELECT verdict.run_id, __schema__.next_fact_time(verdict.run_id, 0) AS base FROM verdict
), performance AS MATERIALIZED (
    -- Only the runner envelope's stats.runtimeResources is a source, never play output.
    SELECT verdict.run_id,
           source.resources IS NOT NULL AS present,
           CASE
               WHEN jsonb_typeof(source.resources) = 'object'
                    AND __schema__.runtime_json_is_count(source.resources -> 'cpuMs')
                    AND __schema__.runtime_json_is_count(source.resources -> 'wallMs')
                    AND __schema__.runtime_json_is_count(source.resources -> 'peakMemoryBytes')
                    AND (NOT source.resources ? 'memoryAdmission'
                         OR jsonb_typeof(source.resources -> 'memoryAdmission') = 'object')
               THEN jsonb_strip_nulls(jsonb_build_object(
                   'attempt', verdict.attempt,
                   'cpuMs', source.resources -> 'cpuMs',
                   'wallMs', source.resources -> 'wallMs',
                   'peakMemoryBytes', source.resources -> 'peakMemoryBytes',
                   'memoryAdmission', source.resources -> 'memoryAdmission'
               ))
           END AS facts
    FROM verdict
    CROSS JOIN LATERAL (
        SELECT CASE
            WHEN jsonb_typeof(verdict.result -> 'stats') = 'object' THEN verdict.result -> 'stats' -> 'runtimeResources'
        END AS resources
    ) AS source
), written_attempt AS (
    UPDATE __schema__.attempts AS attempt
    SET runner_result_json = recorded.result,
        runner_log_payload_json = CASE
            WHEN recorded.records_now AND recorded.keeps_log_payload THEN %(log_payload)s::jsonb
            ELSE recorded.prior_log_payload
        END,
        runner_terminal_received_at = coalesce(attempt.runner_terminal_received_at,
                                               CASE WHEN recorded.records_now THEN clock_timestamp() END),
        status = CASE verdict.outcome
            WHEN 'completed' THEN 'completed'
            WHEN 'cancelled' THEN 'cancelled'
            WHEN 'failed' THEN 'failed'
            WHEN 'retry' THEN 'failed'
            ELSE attempt.status
        END,
        finished_at = CASE WHEN verdict.outcome IS NULL THEN attempt.finished_at ELSE now() END,
        updated_at = now()
    FROM recorded
    LEFT JOIN verdict ON verdict.run_id = recorded.run_id
    WHERE attempt.run_id = recorded.run_id
      AND attempt.attempt = recorded.attempt
      AND recorded.lease_matches
      AND ((recorded.records_now) OR verdict.outcome IS NOT NULL)
    RETURNING attempt.run_id
), run_after AS (
    UPDATE __schema__.runs AS run
    SET status = CASE WHEN verdict.outcome = 'retry' THEN 'queued' ELSE verdict.outcome END,
        terminal_result_json = CASE WHEN verdict.outcome = 'retry' THEN NULL ELSE verdict.result - 'terminalProgressEvents' END,
        suspension_json = CASE WHEN verdict.outcome = 'retry' THEN NULL ELSE run.suspension_json END,
        wait_deadline = CASE WHEN verdict.outcome = 'retry' THEN NULL ELSE run.wait_deadline END,
        finished_at = CASE WHEN verdict.outcome = 'retry' THEN NULL ELSE now() END,
        updated_at = now()
    FROM verdict
    WHERE run.run_id = verdict.run_id
    RETURNING run.run_id, run.status,
        run.launch_json #>> '{contractSnapshot,compatibility,terminalRuntimePerformanceSupported}' = 'true' AS performance_supported,
        run.launch_json #>> '{contractSnapshot,compatibility,terminalRuntimeBodyAdmissionSupported}' = 'true' AS body_admission_supported
), billing_job AS (
    INSERT INTO __schema__.compute_billing_jobs_v2 (run_id)
    SELECT run_after.run_id FROM run_after WHERE run_after.status <> 'queued'
    ON CONFLICT (run_id) DO NOTHING
), cleanup_obligation AS (
    -- CLN-1: the attempt's sandbox, from the detached suspension parked on this attempt.
    INSERT INTO __schema__.sandbox_cleanup_jobs_v2 (provider, sandbox_id, run_id, attempt, environment, routing_domain)
    SELECT coalesce(
               nullif(verdict.suspension_json -> 'runtimeSandboxRef' ->> 'provider', ''),
               nullif(verdict.suspension_json ->> 'sandboxProvider', ''),
               'daytona'
           ),
           verdict.suspension_json -> 'runtimeSandboxRef' ->> 'sandboxId',
           verdict.run_id, verdict.attempt,
           coalesce(nullif(verdict.launch_json ->> 'environment', ''), 'production'),
           nullif(verdict.suspension_json -> 'runtimeSandboxRef' ->> 'routingDomain', '')
    FROM verdict
    WHERE verdict.suspension_json ->> 'kind' = 'detached_runner'
      AND verdict.suspension_json -> 'runnerAttempt' = to_jsonb(verdict.attempt)
      AND nullif(verdict.suspension_json -> 'runtimeSandboxRef' ->> 'sandboxId', '') IS NOT NULL
    ON CONFLICT (provider, sandbox_id, routing_domain_key) DO NOTHING
), progress_facts AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT verdict.run_id || ':' || verdict.attempt || ':run.progress:' || progress.position,
           verdict.run_id, 'run.progress',
           jsonb_build_object('runId', verdict.run_id, 'attempt', verdict.attempt, 'event', progress.event),
           'ledger', fact_clock.base + (progress.position - 1) * interval '1 microsecond'
    FROM verdict
    JOIN fact_clock ON fact_clock.run_id = verdict.run_id
    CROSS JOIN LATERAL jsonb_array_elements(
        CASE WHEN jsonb_typeof(verdict.result -> 'terminalProgressEvents') = 'array'
             THEN verdict.result -> 'terminalProgressEvents' ELSE '[]'::jsonb END
    ) WITH ORDINALITY AS progress(event, position)
    ON CONFLICT (event_id) DO NOTHING
), terminal_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT CASE WHEN run_after.status = 'queued'
                THEN verdict.run_id || ':' || verdict.attempt || ':run.attempt_failed'
                ELSE verdict.run_id || ':run.' || run_after.status END,
           verdict.run_id,
           CASE WHEN run_after.status = 'queued' THEN 'run.attempt_failed' ELSE 'run.' || run_after.status END,
           jsonb_strip_nulls(jsonb_build_object(
               'runId', verdict.run_id,
               'attempt', verdict.attempt,
               'status', verdict.result ->> 'status',
               'output', verdict.result -> 'output',
               'error', verdict.result -> 'error',
               'retrying', run_after.status = 'queued'
           ))
           || CASE WHEN run_after.performance_supported AND run_after.status <> 'queued' THEN jsonb_strip_nulls(jsonb_build_object(
               'terminalRuntimePerformance', CASE
                   WHEN performance.facts IS NULL OR run_after.body_admission_supported THEN performance.facts
                   WHEN jsonb_typeof(performance.facts -> 'memoryAdmission') = 'object' THEN
                       CASE WHEN (performance.facts -> 'memoryAdmission') - 'toolResponseBody' = '{}'::jsonb
                            THEN performance.facts - 'memoryAdmission'
                            ELSE jsonb_set(performance.facts, '{memoryAdmission}',
                                           (performance.facts -> 'memoryAdmission') - 'toolResponseBody')
                       END
                   ELSE performance.facts
               END,
               'terminalRuntimePerformanceUnavailableReason',
               CASE WHEN performance.present AND performance.facts IS NULL THEN 'invalid_runner_stats' END
           )) ELSE '{}'::jsonb END,
           'ledger',
           fact_clock.base + CASE WHEN jsonb_typeof(verdict.result -> 'terminalProgressEvents') = 'array'
                    THEN jsonb_array_length(verdict.result -> 'terminalProgressEvents') ELSE 0 END * interval '1 microsecond'
    FROM verdict
    JOIN run_after ON run_after.run_id = verdict.run_id
    JOIN performance ON performance.run_id = verdict.run_id
    JOIN fact_clock ON fact_clock.run_id = verdict.run_id
    ON CONFLICT (event_id) DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM target) AS attempt_exists,
       coalesce((SELECT lease_matches FROM target), false) AS lease_matches,
       coalesce((SELECT result IS NOT NULL AND lease_matches FROM recorded), false) AS recorded,
       coalesce((SELECT records_now AND lease_matches FROM recorded), false) AS is_this_result,
       (SELECT status FROM run_after) AS run_status,
       (SELECT outcome FROM verdict) AS outcome;

-- name: attempts_list_unsettled_terminals
-- Recorded runner terminals on still-open attempts, for settlement by whoever comes first (SWP-5, TRM-7).
SELECT attempt.run_id, attempt.attempt, attempt.lease_token,
       nullif(run.launch_json ->> 'absurdReleaseId', '') AS release_id, run.suspension_json
FROM __schema__.attempts AS attempt
JOIN __schema__.runs AS run ON run.run_id = attempt.run_id
WHERE run.status IN ('running', 'waiting')
  AND attempt.status IN ('claimed', 'running', 'waiting')
  AND attempt.runner_result_json ->> 'status' IN ('completed', 'failed')
  AND (%(release_id)s::text IS NULL OR run.launch_json ->> 'absurdReleaseId' = %(release_id)s::text)
ORDER BY attempt.run_id
LIMIT %(limit)s::integer;
