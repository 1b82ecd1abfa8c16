-- name: runs_park
-- Park claimed attempts and their runs as waiting with the detached-runner suspension and its sandbox resource; write run.waiting; one answer per item, in input order (RUN-3). Items name distinct runs.
-- plan: generic
WITH item AS MATERIALIZED (
    SELECT *
    FROM unnest(%(run_ids)s::text[], %(attempts)s::integer[], %(lease_tokens)s::text[], %(suspensions)s::jsonb[],
                %(resources)s::jsonb[], %(wait_deadlines)s::timestamptz[])
         WITH ORDINALITY AS item(run_id, attempt, lease_token, suspension, resource, wait_deadline, position)
), locked_run AS MATERIALIZED (
    -- Run locks before attempt locks, as every writer of both takes them; in run_id order so batches never deadlock.
    SELECT run.run_id
    FROM __schema__.runs AS run
    WHERE run.run_id IN (SELECT item.run_id FROM item) AND run.status = 'running'
    ORDER BY run.run_id
    FOR NO KEY UPDATE
), parked_attempt AS (
    -- Each item on its own: its exact attempt, its own lease, still claimed or running, no newer attempt.
    UPDATE __schema__.attempts AS target
    SET status = 'waiting', updated_at = now(),
        liveness_deadline = {{liveness_deadline(item.suspension, target.heartbeat_at)}}
    FROM locked_run
    JOIN item ON item.run_id = locked_run.run_id
    WHERE target.run_id = locked_run.run_id
      AND target.attempt = item.attempt
      AND target.lease_token = item.lease_token
      AND target.status IN ('claimed', 'running')
      AND NOT {{newer_attempt_exists(target.run_id, target.attempt)}}
    RETURNING target.run_id, target.attempt
), parked_run AS (
    UPDATE __schema__.runs AS run
    SET status = 'waiting',
        suspension_json = item.suspension,
        runtime_resources_json = CASE
            WHEN item.resource IS NULL THEN run.runtime_resources_json
            ELSE run.runtime_resources_json || jsonb_build_array(item.resource)
        END,
        wait_deadline = coalesce(item.wait_deadline, run.wait_deadline),
        updated_at = now()
    FROM parked_attempt
    JOIN item ON item.run_id = parked_attempt.run_id
    WHERE run.run_id = parked_attempt.run_id
    RETURNING run.run_id
), waiting_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT parked_attempt.run_id || ':' || parked_attempt.attempt || ':run.waiting', parked_attempt.run_id, 'run.waiting',
           jsonb_build_object('runId', parked_attempt.run_id, 'attempt', parked_attempt.attempt,
                              'provider', item.suspension -> 'runtimeSandboxRef' ->> 'provider'),
           'ledger', __schema__.next_fact_time(parked_attempt.run_id, 0)
    FROM parked_attempt
    JOIN parked_run ON parked_run.run_id = parked_attempt.run_id
    JOIN item ON item.run_id = parked_attempt.run_id
    ON CONFLICT (event_id) DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM parked_run WHERE parked_run.run_id = item.run_id) AS parked
FROM item
ORDER BY item.position;

-- name: attempts_heartbeat
-- Bump heartbeat_at (and the liveness deadline, once half a timeout or less of it remains) of many attempts in one statement, each only when it is current (exact attempt active, run open, no newer attempt, its own lease); report each one's currency, a queued cancel and its heartbeat identity, one answer per item in input order (RUN-4). Items name distinct runs; attempts are locked in run_id order so concurrent batches never deadlock.
-- plan: generic
WITH item AS MATERIALIZED (
    SELECT *
    FROM unnest(%(run_ids)s::text[], %(attempts)s::integer[], %(lease_tokens)s::text[])
         WITH ORDINALITY AS item(run_id, attempt, lease_token, position)
), clock AS (
    SELECT clock_timestamp() AS now
), current_attempt AS MATERIALIZED (
    -- Each item on its own: its exact attempt and lease, still active, its run open, no newer attempt.
    SELECT target.run_id, target.attempt, run.suspension_json
    FROM __schema__.attempts AS target
    JOIN item ON item.run_id = target.run_id AND item.attempt = target.attempt AND item.lease_token = target.lease_token
    JOIN __schema__.runs AS run ON run.run_id = target.run_id
    WHERE target.status IN ('claimed', 'running', 'waiting')
      AND run.status IN ('running', 'waiting')
      AND NOT {{newer_attempt_exists(target.run_id, target.attempt)}}
    ORDER BY target.run_id
    FOR NO KEY UPDATE OF target
), bumped AS (
    UPDATE __schema__.attempts AS target
    SET heartbeat_at = greatest(clock.now, target.heartbeat_at + interval '1 microsecond'),
        liveness_deadline = {{beat_liveness_deadline(
            target.liveness_deadline,
            {{liveness_deadline(current_attempt.suspension_json, greatest(clock.now, target.heartbeat_at + interval '1 microsecond'))}},
            greatest(clock.now, target.heartbeat_at + interval '1 microsecond'))}},
        updated_at = now()
    FROM current_attempt, clock
    WHERE target.run_id = current_attempt.run_id
      AND target.attempt = current_attempt.attempt
      -- Rechecked after the row lock: a settlement that committed meanwhile ended the attempt.
      AND target.status IN ('claimed', 'running', 'waiting')
    RETURNING target.run_id, target.heartbeat_at
)
SELECT bumped.run_id IS NOT NULL AS current,
       EXISTS (
           SELECT 1 FROM __schema__.control AS cancel
           WHERE cancel.key = {{cancel_key(item.run_id)}}
       ) AS cancel_requested,
       to_char(bumped.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS heartbeat_identity
FROM item
LEFT JOIN bumped ON bumped.run_id = item.run_id
ORDER BY item.position;

-- name: runs_cancel
-- Queue runtime_cancel:<run_id>; a queued run, or one waiting durably (WAIT-6: its sandbox is already released), is cancelled at once with its run.cancelled fact and billing job (RUN-7).
WITH locked_run AS MATERIALIZED (
    SELECT run.run_id, run.status, run.suspension_json, run.runtime_resources_json
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
    FOR NO KEY UPDATE
), queued_cancel AS (
    INSERT INTO __schema__.control (key, value_json, created_at)
    SELECT {{cancel_key(locked_run.run_id)}},
           jsonb_build_object('runId', locked_run.run_id, 'reason', %(reason)s::text), now()
    FROM locked_run
    WHERE locked_run.status IN ('queued', 'running', 'waiting')
    ON CONFLICT (key) DO NOTHING
    RETURNING key
), cancelled_run AS (
    UPDATE __schema__.runs AS run
    SET status = 'cancelled',
        terminal_result_json = jsonb_build_object('status', 'cancelled', 'reason', %(reason)s::text),
        finished_at = now(), updated_at = now()
    FROM locked_run
    WHERE run.run_id = locked_run.run_id AND (locked_run.status = 'queued' OR {{durable_wait(locked_run)}})
    RETURNING run.run_id, run.runtime_resources_json
), billing_job AS (
    -- A durably waiting run's sandbox was released when it began to wait; its delete may not be accepted yet.
    INSERT INTO __schema__.compute_billing_jobs_v2 (run_id, available_at)
    SELECT cancelled_run.run_id, {{billing_job_available_at(cancelled_run.runtime_resources_json)}}
    FROM cancelled_run
    ON CONFLICT (run_id) DO NOTHING
), cancelled_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT cancelled_run.run_id || ':run.cancelled', cancelled_run.run_id, 'run.cancelled',
           jsonb_build_object('runId', cancelled_run.run_id, 'reason', %(reason)s::text),
           'ledger', __schema__.next_fact_time(cancelled_run.run_id, 0)
    FROM cancelled_run
    ON CONFLICT (event_id) DO NOTHING
)
SELECT locked_run.status AS prior_status,
       EXISTS (SELECT 1 FROM cancelled_run) AS cancelled,
       locked_run.status IN ('queued', 'running', 'waiting') AS cancel_queued
FROM locked_run;

-- name: runs_read_status
-- The status snapshot of one run: its attempts with their verdicts, its output or error, its facts' delivery, why it is still queued (FSH-9), and the schema actually queried (RUN-8).
SELECT run.run_id, run.org_id, run.status, run.play_name, run.graph_hash,
       {{queued_because(run, %(default_max_active)s::integer)}} AS queued_because,
       run.launch_json ->> 'runtimeBackend' AS runtime_backend,
       run.run_log_store, run.definition_scope,
       run.created_at, run.updated_at, run.started_at, run.finished_at,
       relation.relnamespace::regnamespace::text AS scheduler_schema,
       -- WAIT-6: what a durably waiting run waits for, and until when.
       CASE WHEN {{durable_wait(run)}} THEN jsonb_strip_nulls(jsonb_build_object(
                'kind', run.suspension_json ->> 'kind', 'key', run.suspension_json ->> 'key',
                'event', run.suspension_json ->> 'event', 'until', run.wait_deadline,
                'since', run.suspension_json -> 'suspendedAt')) END AS wait,
       (
           SELECT coalesce(jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                      'attempt', attempt.attempt, 'status', attempt.status,
                      'createdAt', attempt.created_at, 'finishedAt', attempt.finished_at,
                      'verdict', coalesce(attempt.runner_result_json ->> 'verdict',
                                          attempt.runner_result_json -> 'error' ->> 'code',
                                          attempt.runner_result_json ->> 'status')
                  )) ORDER BY attempt.attempt), '[]'::jsonb)
           FROM __schema__.attempts AS attempt
           WHERE attempt.run_id = run.run_id
       ) AS attempts,
       run.terminal_result_json -> 'output' AS output,
       run.terminal_result_json -> 'error' AS error,
       (SELECT jsonb_build_object(
                   'facts', count(*),
                   'delivered', count(*) FILTER (WHERE fact.delivered_at IS NOT NULL),
                   'failedHeads', count(*) FILTER (WHERE fact.delivered_at IS NULL AND fact.failed_at IS NOT NULL))
        FROM __schema__.outbox AS fact WHERE fact.run_id = run.run_id) AS delivery
FROM __schema__.runs AS run
JOIN pg_class AS relation ON relation.oid = run.tableoid
WHERE run.run_id = %(run_id)s::text;

-- name: attempts_read_standing
-- Where a run and one of its attempts stand: run status, attempt status, and whether any newer attempt row exists (RUN-5).
SELECT run.status AS run_status,
       attempt.status AS attempt_status,
       {{newer_attempt_row_exists(run.run_id, %(attempt)s::integer)}} AS superseded
FROM __schema__.runs AS run
LEFT JOIN __schema__.attempts AS attempt ON attempt.run_id = run.run_id AND attempt.attempt = %(attempt)s::integer
WHERE run.run_id = %(run_id)s::text;

-- name: runs_register_array_input_intent
-- Mark array input started on an open run of this org whose named attempt is active with no newer attempt (RUN-6).
UPDATE __schema__.runs AS run
SET array_input_started = true
WHERE run.run_id = %(run_id)s::text
  AND run.org_id = %(org_id)s::text
  AND run.status IN ('queued', 'running', 'waiting')
  AND EXISTS (
      SELECT 1 FROM __schema__.attempts AS current_attempt
      WHERE current_attempt.run_id = run.run_id
        AND current_attempt.attempt = %(attempt)s::integer
        AND current_attempt.status IN ('claimed', 'running', 'waiting')
        AND NOT {{newer_attempt_exists(current_attempt.run_id, current_attempt.attempt)}}
  )
RETURNING run.run_id;

-- name: runs_exists
-- Whether a run exists (to tell 404 from a refused operation).
SELECT EXISTS (SELECT 1 FROM __schema__.runs WHERE run_id = %(run_id)s::text) AS present;

-- name: attempts_read_lease
-- The lease token of one attempt, for minting its runner token.
SELECT attempt.lease_token, attempt.status
FROM __schema__.attempts AS attempt
WHERE attempt.run_id = %(run_id)s::text AND attempt.attempt = %(attempt)s::integer;

-- name: control_hint_failed_start
-- A start that failed before any answer named its sandbox (a create that timed out or was cut off may still be made by the provider): the sweep lists the attempt's sandboxes by their tags on its next ticks (CLN-1, PRV-2).
INSERT INTO __schema__.control (key, value_json)
VALUES ({{unreconciled_key(%(run_id)s::text, %(attempt)s::integer)}},
        jsonb_build_object('runId', %(run_id)s::text, 'attempt', %(attempt)s::integer))
ON CONFLICT (key) DO NOTHING;

-- name: runs_record_unparked_sandbox
-- A sandbox started for an attempt that could not park (it settled or lost its claim first): keep its billing resource and give it a cleanup obligation (CLN-1).
WITH resource AS (
    UPDATE __schema__.runs AS run
    SET runtime_resources_json = run.runtime_resources_json || jsonb_build_array(%(resource)s::jsonb),
        updated_at = now()
    WHERE run.run_id = %(run_id)s::text
      AND NOT run.runtime_resources_json @> jsonb_build_array(jsonb_build_object('sandboxId', %(sandbox_id)s::text))
    RETURNING run.run_id, run.launch_json
), started_sandbox AS (
    SELECT %(provider)s::text AS provider, %(sandbox_id)s::text AS sandbox_id, run.run_id,
           %(attempt)s::integer AS attempt, {{launch_environment(run.launch_json)}} AS environment,
           %(routing_domain)s::text AS routing_domain, {{fresh_cleanup_state()}}
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
)
{{cleanup_obligations_insert(started_sandbox)}};

-- name: runs_read_terminal_result
-- The recorded terminal result of a run (the demo prints its output).
SELECT run.status, run.terminal_result_json FROM __schema__.runs AS run WHERE run.run_id = %(run_id)s::text;

-- name: runs_read_late_results
-- The runner results that arrived after a verdict settled their attempts, for the status read (RUN-8) and the admin.
SELECT late.attempt, late.received_at, late.result_json
FROM __schema__.late_runner_results AS late
WHERE late.run_id = %(run_id)s::text
ORDER BY late.attempt;
