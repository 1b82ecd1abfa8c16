-- name: runs_list_liveness_work
-- Read-only liveness discovery across every release lane: recorded terminals to settle, and stale parked runners to inspect, paged per provider after a per-provider cursor (SWP-1, SWP-2); candidates found through liveness_deadline's index, so an idle tick costs an index probe, not a read of every parked run.
-- plan: generic
{{liveness_work((
    SELECT {{attempt_candidate_columns()}} FROM __schema__.attempts AS attempt
    WHERE attempt.status = 'waiting' AND attempt.runner_result_json IS NULL
      -- now(), stable, can be an index condition (clock_timestamp() cannot); the recheck below uses the clock.
      AND attempt.liveness_deadline <= coalesce(%(now)s::timestamptz, now())
    UNION ALL
    -- Parked by an older release, which leaves the deadline empty. A branch of its own: as one OR with the
    -- deadline, the generic plan could walk the whole index and filter, reading every parked run on every tick.
    SELECT {{attempt_candidate_columns()}} FROM __schema__.attempts AS attempt
    WHERE attempt.status = 'waiting' AND attempt.runner_result_json IS NULL AND attempt.liveness_deadline IS NULL
    UNION ALL
    SELECT {{attempt_candidate_columns()}} FROM __schema__.attempts AS attempt
    WHERE attempt.status IN ('claimed', 'running', 'waiting') AND attempt.runner_result_json IS NOT NULL
))}};

-- name: runs_list_liveness_work_historical
-- The same discovery on a schema without attempts.liveness_deadline (SCH-3, reader-first): every active attempt is a candidate.
-- plan: custom
{{liveness_work((
    SELECT {{attempt_candidate_columns()}} FROM __schema__.attempts AS attempt
    WHERE attempt.status IN ('running', 'waiting')
))}};

-- name: attempts_record_runner_loss
-- TRM-2, SWP-4: the synthetic runner-loss ingress (the sweep's runner_lost verdict, the operator's declare_runner_lost): record the loss on the parked attempt only while its heartbeat_at IS NOT DISTINCT FROM the identity the caller saw (null: no heartbeat ever), its lease holds, no newer attempt exists and no cancel is queued, never over a recorded result; `recorded` is true when a result is recorded on the attempt, by this call or an earlier one.
WITH locked_run AS MATERIALIZED (
    -- The run before the attempt, as every writer locks; whatever its status, so the read below follows a
    -- settlement that held the lock first (a row lock reads its row's latest committed version).
    SELECT run.run_id, run.status, run.run_log_store, run.suspension_json
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
    FOR NO KEY UPDATE
), judged AS MATERIALIZED (
    SELECT attempt.run_id, attempt.attempt, attempt.status, attempt.heartbeat_at,
           attempt.runner_result_json IS NOT NULL AS has_result,
           locked_run.status AS run_status, locked_run.run_log_store, locked_run.suspension_json
    FROM __schema__.attempts AS attempt
    JOIN locked_run ON locked_run.run_id = attempt.run_id
    WHERE attempt.run_id = %(run_id)s::text
      AND attempt.attempt = %(attempt)s::integer
      AND attempt.lease_token = %(lease_token)s::text
    FOR NO KEY UPDATE OF attempt
), recorded AS (
    UPDATE __schema__.attempts AS target
    SET {{parked_verdict_write(judged)}}
    FROM judged
    WHERE target.run_id = judged.run_id
      AND target.attempt = judged.attempt
      AND NOT judged.has_result
      AND judged.status = 'waiting'
      AND judged.run_status = 'waiting'
      AND judged.suspension_json ->> 'kind' = 'detached_runner'
      AND judged.suspension_json -> 'runnerAttempt' = to_jsonb(judged.attempt)
      AND judged.heartbeat_at IS NOT DISTINCT FROM %(expected_heartbeat_at)s::timestamptz
      AND NOT {{newer_attempt_exists(target.run_id, target.attempt)}}
      AND NOT EXISTS (SELECT 1 FROM __schema__.control AS cancel WHERE cancel.key = {{cancel_key(target.run_id)}})
    RETURNING target.run_id
)
SELECT EXISTS (SELECT 1 FROM recorded) AS recorded_now,
       EXISTS (SELECT 1 FROM recorded) OR coalesce((SELECT judged.has_result FROM judged), false) AS recorded;

-- name: attempts_record_parked_verdict
-- The sweep's first write for the verdicts other than a lost runner: record the terminal a parked attempt would, fenced in one statement on everything a provider read could have outdated (RUN-10, SWP-7).
WITH parked_run AS MATERIALIZED (
    SELECT run.run_id, run.run_log_store, run.wait_deadline
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
      AND run.status = 'waiting'
      AND run.suspension_json ->> 'kind' = 'detached_runner'
      AND run.suspension_json -> 'runnerAttempt' = to_jsonb(%(attempt)s::integer)
    FOR NO KEY UPDATE
)
UPDATE __schema__.attempts AS target
SET {{parked_verdict_write(parked_run)}}
FROM parked_run
WHERE target.run_id = parked_run.run_id
  AND target.attempt = %(attempt)s::integer
  AND target.status = 'waiting'
  AND target.lease_token = %(lease_token)s::text
  AND target.runner_result_json IS NULL
  AND NOT {{newer_attempt_exists(target.run_id, target.attempt)}}
  AND CASE %(kind)s::text
      WHEN 'cancel_unacknowledged' THEN
          target.heartbeat_at IS NOT DISTINCT FROM %(expected_heartbeat_at)s::timestamptz
          AND EXISTS (SELECT 1 FROM __schema__.control AS cancel WHERE cancel.key = {{cancel_key(target.run_id)}})
      WHEN 'wait_deadline_exceeded' THEN
          parked_run.wait_deadline <= coalesce(%(now)s::timestamptz, clock_timestamp())
      -- A kind this statement does not know is a caller's bug: fail loudly instead of reading as "fenced".
      ELSE ('unknown verdict kind: ' || %(kind)s::text)::boolean
  END
RETURNING target.run_id;

-- name: runs_list_unacknowledged_cancels
-- Parked runs whose queued cancel the runner has not acknowledged within its heartbeat timeout of the cancel being queued, however often it still heartbeats (RUN-10); read from the open cancels alone, marking those whose run has ended, so a tick costs the cancels still open, not every parked run or every cancel ever queued.
-- plan: generic
-- Every read is through the open-cancels index or by key, so one plan fits every tick (planning it cost 2 ms).
WITH open_cancel AS MATERIALIZED (
    SELECT cancel.key, cancel.created_at, {{cancel_run_id(cancel.key)}} AS run_id
    FROM __schema__.control AS cancel
    WHERE {{open_cancel(cancel)}}
), ended AS MATERIALIZED (
    -- In key order and SKIP LOCKED, so two sweeps marking at once neither deadlock nor wait for each other; a
    -- thousand a tick, so the history a first tick after an upgrade finds is marked over ticks, not in one.
    SELECT cancel.key
    FROM __schema__.control AS cancel
    WHERE cancel.key IN (SELECT open_cancel.key
                         FROM open_cancel
                         WHERE NOT EXISTS (SELECT 1 FROM __schema__.runs AS run
                                           WHERE run.run_id = open_cancel.run_id
                                             AND run.status IN ('queued', 'running', 'waiting')
                                           OFFSET 0))
    ORDER BY cancel.key
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
), marked AS (
    -- Only a hint for the index: every reader of a cancel still asks whether its key exists.
    UPDATE __schema__.control AS cancel
    SET value_json = cancel.value_json || jsonb_build_object('runEndedAt', (extract(epoch FROM now()) * 1000)::bigint)
    WHERE cancel.key IN (SELECT ended.key FROM ended)
)
SELECT run.run_id, attempt.attempt, attempt.lease_token, run.suspension_json,
       to_char(attempt.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS heartbeat_identity
FROM open_cancel AS cancel
-- Each open cancel's run and attempts by key (OFFSET 0 keeps the planner from hashing every parked run instead).
CROSS JOIN LATERAL (
    SELECT parked.run_id, parked.suspension_json FROM __schema__.runs AS parked
    WHERE parked.run_id = cancel.run_id AND parked.status = 'waiting'
      AND parked.suspension_json ->> 'kind' = 'detached_runner'
    OFFSET 0
) AS run
CROSS JOIN LATERAL (
    SELECT current.attempt, current.lease_token, current.heartbeat_at FROM __schema__.attempts AS current
    WHERE current.run_id = run.run_id AND to_jsonb(current.attempt) = run.suspension_json -> 'runnerAttempt'
      AND current.status = 'waiting' AND current.runner_result_json IS NULL
    OFFSET 0
) AS attempt
WHERE cancel.created_at + (
          CASE WHEN jsonb_typeof(run.suspension_json -> 'heartbeatTimeoutMs') = 'number'
                    AND (run.suspension_json ->> 'heartbeatTimeoutMs')::double precision >= 0
               THEN (run.suspension_json ->> 'heartbeatTimeoutMs')::double precision
               ELSE %(default_timeout_ms)s::double precision END
      ) * interval '1 millisecond' <= coalesce(%(now)s::timestamptz, clock_timestamp())
ORDER BY run.run_id
LIMIT %(limit)s::integer;

-- name: runs_list_passed_wait_deadlines
-- Parked runs whose hard ceiling has passed (SWP-7); no provider is asked.
-- plan: custom
SELECT run.run_id, attempt.attempt, attempt.lease_token, run.suspension_json
FROM __schema__.runs AS run
JOIN __schema__.attempts AS attempt
  ON attempt.run_id = run.run_id AND to_jsonb(attempt.attempt) = run.suspension_json -> 'runnerAttempt'
WHERE run.status = 'waiting'
  AND run.wait_deadline IS NOT NULL
  AND run.wait_deadline <= coalesce(%(now)s::timestamptz, clock_timestamp())
  AND run.suspension_json ->> 'kind' = 'detached_runner'
  AND attempt.status = 'waiting'
  AND attempt.runner_result_json IS NULL
ORDER BY run.wait_deadline, run.run_id
LIMIT %(limit)s::integer;

-- name: attempts_list_expired_claims
-- Claims whose lease expired before the dispatcher parked them (RUN-9), with the heartbeat identity the recovery is fenced on.
-- plan: custom
SELECT attempt.run_id, attempt.attempt, attempt.lease_token,
       to_char(attempt.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS heartbeat_identity
FROM __schema__.attempts AS attempt
JOIN __schema__.runs AS run ON run.run_id = attempt.run_id
WHERE attempt.status IN ('claimed', 'running')
  AND attempt.lease_expires_at <= coalesce(%(now)s::timestamptz, clock_timestamp())
  AND attempt.runner_result_json IS NULL
  AND run.status = 'running'
ORDER BY attempt.lease_expires_at
LIMIT %(limit)s::integer;

-- name: attempts_record_dispatch_lost
-- Record dispatch_lost on a claim that never parked, fenced as SWP-4 fences a verdict: run running, claim still unparked and expired, same lease, the heartbeat identity the listing read, no result, no newer attempt, no queued cancel (RUN-9); leave the key by which the sweep finds a sandbox the dead dispatcher may have started (CLN-1).
WITH claimed_run AS MATERIALIZED (
    SELECT run.run_id
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text AND run.status = 'running'
    FOR NO KEY UPDATE
), recorded AS (
    UPDATE __schema__.attempts AS target
    SET runner_result_json = %(result)s::jsonb,
        runner_terminal_received_at = clock_timestamp(),
        updated_at = now()
    FROM claimed_run
    WHERE target.run_id = claimed_run.run_id
      AND target.attempt = %(attempt)s::integer
      AND target.lease_token = %(lease_token)s::text
      AND target.status IN ('claimed', 'running')
      AND target.lease_expires_at <= coalesce(%(now)s::timestamptz, clock_timestamp())
      AND target.runner_result_json IS NULL
      AND target.heartbeat_at IS NOT DISTINCT FROM %(expected_heartbeat_at)s::timestamptz
      AND NOT {{newer_attempt_exists(target.run_id, target.attempt)}}
      AND NOT EXISTS (SELECT 1 FROM __schema__.control AS cancel WHERE cancel.key = {{cancel_key(target.run_id)}})
    RETURNING target.run_id, target.attempt
), unparked_hint AS (
    INSERT INTO __schema__.control (key, value_json)
    SELECT {{unreconciled_key(recorded.run_id, recorded.attempt)}},
           jsonb_build_object('runId', recorded.run_id, 'attempt', recorded.attempt)
    FROM recorded
    ON CONFLICT (key) DO NOTHING
)
SELECT recorded.run_id FROM recorded;

-- name: control_list_unreconciled_sandboxes
-- Attempts that never parked but may have left a sandbox (their runner reported, or their claim was recovered), with what placing that sandbox needs (CLN-1).
-- plan: custom
SELECT hint.key, run.run_id, (hint.value_json ->> 'attempt')::integer AS attempt, run.org_id, run.launch_json
FROM __schema__.control AS hint
JOIN __schema__.runs AS run ON run.run_id = hint.value_json ->> 'runId'
WHERE hint.key LIKE {{unreconciled_key_pattern()}}
ORDER BY hint.created_at
LIMIT %(limit)s::integer;

-- name: control_reconcile_unparked_sandboxes
-- Give the sandboxes found for such an attempt their cleanup obligations and drop the hint, in one statement (CLN-1).
WITH hint AS (
    DELETE FROM __schema__.control AS hint
    WHERE hint.key = %(key)s::text
    RETURNING hint.value_json ->> 'runId' AS run_id, (hint.value_json ->> 'attempt')::integer AS attempt
), found_sandboxes AS (
    SELECT %(provider)s::text AS provider, started.sandbox_id, hint.run_id, hint.attempt,
           {{launch_environment(run.launch_json)}} AS environment, %(routing_domain)s::text AS routing_domain,
           {{fresh_cleanup_state()}}
    FROM hint
    JOIN __schema__.runs AS run ON run.run_id = hint.run_id
    CROSS JOIN unnest(%(sandbox_ids)s::text[]) AS started(sandbox_id)
), obligations AS (
    {{cleanup_obligations_insert(found_sandboxes)}}
)
SELECT (SELECT count(*) FROM hint) AS dropped, (SELECT count(*) FROM obligations) AS obligations;
