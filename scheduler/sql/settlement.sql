-- name: attempts_settle
-- Record runner terminals first-write-wins (TRM-1) and settle every current attempt among them in the same statement: attempt, run (terminal or queued for a retry), billing job, cleanup obligation, progress and terminal facts (TRM-4, TRM-5); one answer row per item, in input order. An item with a null result only settles what is recorded. Items name distinct runs.
-- plan: generic
WITH item AS MATERIALIZED (
    SELECT *
    FROM unnest(%(run_ids)s::text[], %(attempts)s::integer[], %(lease_tokens)s::text[], %(results)s::jsonb[],
                %(log_payloads)s::jsonb[], %(from_runner)s::boolean[])
         WITH ORDINALITY AS item(run_id, attempt, lease_token, result, log_payload, from_runner, position)
), locked_run AS MATERIALIZED (
    -- Run locks before attempt locks, as every writer of both takes them; in run_id order so batches never deadlock.
    SELECT run.run_id, run.status, run.max_attempts, run.launch_json, run.suspension_json,
           run.run_log_store = 'planet_scale' AS keeps_log_payload, run.runtime_resources_json
    FROM __schema__.runs AS run
    WHERE run.run_id IN (SELECT item.run_id FROM item)
    ORDER BY run.run_id
    FOR NO KEY UPDATE
), target AS MATERIALIZED (
    SELECT attempt.run_id, attempt.attempt, attempt.runner_result_json AS prior_result,
           attempt.runner_log_payload_json AS prior_log_payload, item.log_payload,
           locked_run.launch_json, locked_run.suspension_json, locked_run.max_attempts, locked_run.keeps_log_payload,
           locked_run.runtime_resources_json, flags.lease_matches, flags.records_now, flags.current, item.from_runner,
           CASE WHEN flags.records_now AND flags.lease_matches THEN item.result
                ELSE attempt.runner_result_json END AS result
    FROM item
    JOIN locked_run ON locked_run.run_id = item.run_id
    JOIN __schema__.attempts AS attempt ON attempt.run_id = item.run_id AND attempt.attempt = item.attempt
    CROSS JOIN LATERAL (
        -- TRM-4: only the attempt's own lease passes; a null token never does.
        SELECT coalesce(attempt.lease_token = item.lease_token, false) AS lease_matches,
               attempt.runner_result_json IS NULL
                   AND attempt.status NOT IN ('completed', 'failed')
                   AND item.result IS NOT NULL AS records_now,
               attempt.status IN ('claimed', 'running', 'waiting')
                   AND locked_run.status IN ('queued', 'running', 'waiting')
                   AND NOT {{newer_attempt_exists(attempt.run_id, attempt.attempt)}} AS current
    ) AS flags
    ORDER BY attempt.run_id
    FOR NO KEY UPDATE OF attempt
), verdict AS MATERIALIZED (
    SELECT target.run_id, target.attempt, target.result, target.suspension_json, target.launch_json,
           target.runtime_resources_json, target.records_now AND target.from_runner AS runner_reported,
           CASE
               WHEN target.result ->> 'status' = 'completed' THEN 'completed'
               WHEN EXISTS (
                   SELECT 1 FROM __schema__.control AS cancel
                   WHERE cancel.key = {{cancel_key(target.run_id)}}
               ) THEN 'cancelled'
               WHEN target.result -> 'error' ->> 'code' = ANY (%(retryable_codes)s::text[])
                    -- WAIT-2: suspended attempts are not failures and do not count against max_attempts.
                    AND target.attempt - (SELECT count(*) FROM __schema__.attempts AS suspended
                                          WHERE suspended.run_id = target.run_id AND suspended.status = 'suspended')
                        < target.max_attempts THEN 'retry'
               ELSE 'failed'
           END AS outcome,
           -- One base time for every fact this statement writes, so their order is causal.
           __schema__.next_fact_time(target.run_id, 0) AS fact_base,
           CASE WHEN jsonb_typeof(target.result -> 'terminalProgressEvents') = 'array'
                THEN target.result -> 'terminalProgressEvents' ELSE '[]'::jsonb END AS progress_events,
           -- Only the runner envelope's stats.runtimeResources is a source, never play output.
           CASE WHEN jsonb_typeof(target.result -> 'stats') = 'object'
                THEN target.result -> 'stats' -> 'runtimeResources' END AS resources
    FROM target
    WHERE target.current
      AND target.lease_matches
      AND target.result ->> 'status' IN ('completed', 'failed')
), written_attempt AS (
    UPDATE __schema__.attempts AS attempt
    SET runner_result_json = target.result,
        runner_log_payload_json = CASE
            WHEN target.records_now AND target.keeps_log_payload THEN target.log_payload
            ELSE target.prior_log_payload
        END,
        runner_terminal_received_at = coalesce(attempt.runner_terminal_received_at,
                                               CASE WHEN target.records_now THEN clock_timestamp() END),
        status = CASE verdict.outcome WHEN 'retry' THEN 'failed' ELSE coalesce(verdict.outcome, attempt.status) END,
        finished_at = CASE WHEN verdict.outcome IS NULL THEN attempt.finished_at ELSE now() END,
        updated_at = now()
    FROM target
    LEFT JOIN verdict ON verdict.run_id = target.run_id
    WHERE attempt.run_id = target.run_id
      AND attempt.attempt = target.attempt
      AND target.lease_matches
      AND (target.records_now OR verdict.outcome IS NOT NULL)
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
    RETURNING run.run_id, run.status
), billing_job AS (
    INSERT INTO __schema__.compute_billing_jobs_v2 (run_id, available_at)
    SELECT verdict.run_id, {{billing_job_available_at(verdict.runtime_resources_json)}}
    FROM verdict WHERE verdict.outcome <> 'retry'
    ON CONFLICT (run_id) DO NOTHING
), parked_sandbox AS (
    {{ended_attempt_sandbox(verdict)}}
), cleanup_obligation AS (
    {{cleanup_obligations_insert(parked_sandbox)}}
), unparked_runner AS (
    {{unparked_runner_hint(verdict, verdict.runner_reported)}}
), facts AS (
    -- The progress facts in their order, then the terminal fact (or run.attempt_failed on a retry), in one insert.
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT verdict.run_id || ':' || verdict.attempt || ':run.progress:' || progress.position,
           verdict.run_id, 'run.progress',
           jsonb_build_object('runId', verdict.run_id, 'attempt', verdict.attempt, 'event', progress.event),
           'ledger', verdict.fact_base + (progress.position - 1) * interval '1 microsecond'
    FROM verdict
    CROSS JOIN LATERAL jsonb_array_elements(verdict.progress_events) WITH ORDINALITY AS progress(event, position)
    UNION ALL
    SELECT CASE WHEN verdict.outcome = 'retry'
                THEN verdict.run_id || ':' || verdict.attempt || ':run.attempt_failed'
                ELSE verdict.run_id || ':run.' || verdict.outcome END,
           verdict.run_id,
           CASE WHEN verdict.outcome = 'retry' THEN 'run.attempt_failed' ELSE 'run.' || verdict.outcome END,
           -- Only the envelope's absent keys are left out: nulls inside output and error reach the ledger as sent.
           jsonb_build_object('runId', verdict.run_id, 'attempt', verdict.attempt,
                              'status', verdict.result ->> 'status', 'retrying', verdict.outcome = 'retry')
           || CASE WHEN verdict.result ? 'output' THEN jsonb_build_object('output', verdict.result -> 'output')
                   ELSE '{}'::jsonb END
           || CASE WHEN verdict.result ? 'error' THEN jsonb_build_object('error', verdict.result -> 'error')
                   ELSE '{}'::jsonb END
           || CASE WHEN verdict.launch_json #>> '{contractSnapshot,compatibility,terminalRuntimePerformanceSupported}' = 'true'
                        AND verdict.outcome <> 'retry'
                   -- TRM-5: both keys whenever the launch supports them (null when there is nothing to say).
                   THEN jsonb_build_object(
                       'terminalRuntimePerformance', CASE
                           WHEN performance.facts IS NULL
                                OR verdict.launch_json #>> '{contractSnapshot,compatibility,terminalRuntimeBodyAdmissionSupported}' = 'true'
                           THEN performance.facts
                           WHEN jsonb_typeof(performance.facts -> 'memoryAdmission') = 'object' THEN
                               CASE WHEN (performance.facts -> 'memoryAdmission') - 'toolResponseBody' = '{}'::jsonb
                                    THEN performance.facts - 'memoryAdmission'
                                    ELSE jsonb_set(performance.facts, '{memoryAdmission}',
                                                   (performance.facts -> 'memoryAdmission') - 'toolResponseBody')
                               END
                           ELSE performance.facts
                       END,
                       'terminalRuntimePerformanceUnavailableReason',
                       CASE WHEN verdict.resources IS NOT NULL AND performance.facts IS NULL THEN 'invalid_runner_stats' END
                   )
                   ELSE '{}'::jsonb END,
           'ledger',
           verdict.fact_base + jsonb_array_length(verdict.progress_events) * interval '1 microsecond'
    FROM verdict
    CROSS JOIN LATERAL (
        SELECT CASE
            WHEN jsonb_typeof(verdict.resources) = 'object'
                 AND __schema__.runtime_json_is_count(verdict.resources -> 'cpuMs')
                 AND __schema__.runtime_json_is_count(verdict.resources -> 'wallMs')
                 AND __schema__.runtime_json_is_count(verdict.resources -> 'peakMemoryBytes')
                 AND (NOT verdict.resources ? 'memoryAdmission'
                      OR jsonb_typeof(verdict.resources -> 'memoryAdmission') = 'object')
            -- What the runner sent, nulls inside memoryAdmission included; an absent memoryAdmission stays absent.
            THEN jsonb_build_object(
                'attempt', verdict.attempt,
                'cpuMs', verdict.resources -> 'cpuMs',
                'wallMs', verdict.resources -> 'wallMs',
                'peakMemoryBytes', verdict.resources -> 'peakMemoryBytes'
            ) || CASE WHEN verdict.resources ? 'memoryAdmission'
                      THEN jsonb_build_object('memoryAdmission', verdict.resources -> 'memoryAdmission')
                      ELSE '{}'::jsonb END
        END AS facts
    ) AS performance
    ON CONFLICT (event_id) DO NOTHING
)
SELECT item.run_id, item.attempt,
       target.run_id IS NOT NULL AS attempt_exists,
       coalesce(target.lease_matches, false) AS lease_matches,
       coalesce(target.result IS NOT NULL AND target.lease_matches, false) AS recorded,
       coalesce(target.records_now AND target.lease_matches, false) AS is_this_result,
       run_after.status AS run_status,
       verdict.outcome
FROM item
LEFT JOIN target ON target.run_id = item.run_id
LEFT JOIN verdict ON verdict.run_id = item.run_id
LEFT JOIN run_after ON run_after.run_id = item.run_id
ORDER BY item.position;

-- name: attempts_keep_late_result
-- A runner's terminal that arrives, on the attempt's own lease, after a scheduler verdict (runner_lost, dispatch_lost, wait_deadline_exceeded, an unacknowledged cancel) settled the attempt: kept beside the verdict, first write wins; the attempt, the run and the ledger keep the verdict. A verdict is told by who recorded it: the scheduler's statements mark theirs with `verdict`, which a runner's result can never carry (the API refuses it), never by an error code a runner could send. Answers the run's actual status.
WITH judged AS MATERIALIZED (
    SELECT attempt.run_id, attempt.attempt
    FROM __schema__.attempts AS attempt
    WHERE attempt.run_id = %(run_id)s::text
      AND attempt.attempt = %(attempt)s::integer
      AND attempt.lease_token = %(lease_token)s::text
      AND attempt.status IN ('completed', 'failed', 'cancelled')
      AND attempt.runner_result_json ? 'verdict'
      AND attempt.runner_result_json IS DISTINCT FROM %(result)s::jsonb
), kept AS (
    INSERT INTO __schema__.late_runner_results (run_id, attempt, result_json)
    SELECT judged.run_id, judged.attempt, %(result)s::jsonb FROM judged
    ON CONFLICT (run_id, attempt) DO NOTHING
    RETURNING run_id
)
SELECT EXISTS (SELECT 1 FROM judged) AS late, EXISTS (SELECT 1 FROM kept) AS kept,
       (SELECT run.status FROM __schema__.runs AS run WHERE run.run_id = %(run_id)s::text) AS run_status;
