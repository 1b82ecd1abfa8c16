-- Fragments: SQL spelled once and spliced into blocks as {{name(arguments)}} when the files load.
-- Each stands for one definition that several statements must share exactly; a test holds every
-- block to them (no block spells one out by hand).

-- fragment: newer_attempt_exists(run_id, attempt)
-- requirements §1.2: "a newer attempt exists" is a higher attempt in a fencing status (a released claim does not fence).
EXISTS (
    SELECT 1 FROM __schema__.attempts AS newer
    WHERE newer.run_id = {run_id} AND newer.attempt > {attempt}
      AND newer.status IN ('claimed', 'running', 'waiting', 'completed', 'failed', 'suspended')
)

-- fragment: newer_attempt_row_exists(run_id, attempt)
-- RUN-5 only: an attempt is superseded once any higher attempt row exists, a released claim included. A read,
-- never a fence: every fence uses newer_attempt_exists.
EXISTS (SELECT 1 FROM __schema__.attempts AS newer WHERE newer.run_id = {run_id} AND newer.attempt > {attempt})

-- fragment: cancel_key(run_id)
-- RUN-7: the control key of a queued cancel.
('runtime_cancel:' || {run_id})

-- fragment: cancel_run_id(key)
-- RUN-7: the run a cancel key names (cancel_key read backwards).
substr({key}, length('runtime_cancel:') + 1)

-- fragment: open_cancel(cancel)
-- RUN-10: a cancel key whose run the sweep has not yet seen ended; word for word the predicate of migration
-- 0027's index, which is what lets the planner read the open cancels through it.
({cancel}.key LIKE 'runtime_cancel:%%' AND NOT ({cancel}.value_json ? 'runEndedAt'))

-- fragment: unreconciled_key(run_id, attempt)
-- CLN-1: the control key of an attempt that never parked but may have left a sandbox.
('sandbox_unreconciled:' || {run_id} || ':' || {attempt})

-- fragment: unreconciled_key_pattern()
-- CLN-1: every such key, for LIKE.
'sandbox_unreconciled:%%'

-- fragment: release_locks(keys)
-- ADM-4, ADM-5: the transaction-scoped advisory locks of a release's admission keys, in one sorted order.
(SELECT count(pg_advisory_xact_lock(hashtextextended('runtime_release_admission:' || ordered.key, 0)))
 FROM (SELECT DISTINCT key FROM unnest({keys}) AS key ORDER BY key OFFSET 0) AS ordered)

-- fragment: deploy_lock_key(schema)
-- SCH-6: the session advisory lock key that serializes deploys of one schema.
hashtext('runtime_scheduler.deploy:' || {schema})

-- fragment: suspension_provider(suspension)
-- requirements §1.9: the provider of a parked sandbox; a suspension naming none falls back to the caller's
-- %(fallback_provider)s (kinds.SUSPENSION_FALLBACK_PROVIDER, the one place that names it).
coalesce(
    nullif({suspension} -> 'runtimeSandboxRef' ->> 'provider', ''),
    nullif({suspension} ->> 'sandboxProvider', ''),
    %(fallback_provider)s::text
)

-- fragment: runner_deadline(suspension, heartbeat_at)
-- SWP-1: when a parked runner is overdue: its last heartbeat (else its start) plus its timeout (the suspension's when
-- a number >= 0, else the caller's %(default_timeout_ms)s). Malformed values read as absent, never as an error.
(coalesce({heartbeat_at},
          CASE WHEN jsonb_typeof({suspension} -> 'startedAtMs') = 'number'
               THEN to_timestamp(({suspension} ->> 'startedAtMs')::double precision / 1000) END)
 + (CASE WHEN jsonb_typeof({suspension} -> 'heartbeatTimeoutMs') = 'number'
              AND ({suspension} ->> 'heartbeatTimeoutMs')::double precision >= 0
         THEN ({suspension} ->> 'heartbeatTimeoutMs')::double precision
         ELSE %(default_timeout_ms)s::double precision END) * interval '1 millisecond')

-- fragment: liveness_deadline(suspension, heartbeat_at)
-- SWP-1: the value the park and heartbeat statements keep in attempts.liveness_deadline: runner_deadline without
-- a default timeout, so NULL (a candidate to recheck, never missed) when the suspension names no usable timeout.
(coalesce({heartbeat_at},
          CASE WHEN jsonb_typeof({suspension} -> 'startedAtMs') = 'number'
               THEN to_timestamp(({suspension} ->> 'startedAtMs')::double precision / 1000) END)
 + CASE WHEN jsonb_typeof({suspension} -> 'heartbeatTimeoutMs') = 'number'
             AND ({suspension} ->> 'heartbeatTimeoutMs')::double precision >= 0
        THEN ({suspension} ->> 'heartbeatTimeoutMs')::double precision * interval '1 millisecond' END)

-- fragment: beat_liveness_deadline(kept, deadline, beat)
-- SWP-1: what a heartbeat at {beat} keeps in liveness_deadline: the kept deadline while it is still at least half a
-- timeout away and no later than {deadline} (the beat's own), else the beat's own. A kept deadline changes no indexed
-- column, so most heartbeats are HOT updates (no index entries); it never passes the true deadline, and discovery
-- rechecks every candidate with heartbeat_at, so a runner is never judged early and never missed.
CASE WHEN {kept} BETWEEN {beat} + ({deadline} - {beat}) / 2 AND {deadline} THEN {kept} ELSE {deadline} END

-- fragment: attempt_candidate_columns()
-- SWP-1: the attempt columns liveness discovery reads, carried by its candidates (no second read of the attempt).
attempt.run_id, attempt.attempt, attempt.lease_token, attempt.status, attempt.heartbeat_at, attempt.runner_result_json

-- fragment: liveness_work(candidates)
-- SWP-1, SWP-2: liveness discovery over `candidates` (a parenthesized SELECT of attempt rows: run_id, attempt,
-- lease_token, status, heartbeat_at, runner_result_json): recorded terminals
-- to settle, stale parked runners to inspect (each rechecked with runner_deadline), paged per provider.
WITH candidate AS MATERIALIZED {candidates},
detached AS MATERIALIZED (
    SELECT run.run_id, attempt.attempt, attempt.lease_token,
           attempt.status AS attempt_status, run.status AS run_status,
           attempt.heartbeat_at,
           attempt.runner_result_json IS NULL AS no_runner_result,
           attempt.runner_result_json ->> 'status' AS runner_result_status,
           run.suspension_json, run.wait_deadline,
           nullif(run.launch_json ->> 'absurdReleaseId', '') AS release_id,
           {{suspension_provider(run.suspension_json)}} AS provider
    FROM candidate AS attempt
    -- Each candidate's run by its key (OFFSET 0 keeps the planner from hashing every parked run instead).
    CROSS JOIN LATERAL (
        SELECT parked.run_id, parked.status, parked.suspension_json, parked.wait_deadline, parked.launch_json
        FROM __schema__.runs AS parked
        WHERE parked.run_id = attempt.run_id
        OFFSET 0
    ) AS run
    WHERE run.status IN ('running', 'waiting')
      -- As the seed's discovery: runnerAttempt read as text and cast, so 1 and "1" both name attempt 1; a value
      -- that is no integer names none (the seed's bare cast would fail the whole sweep on it).
      AND attempt.attempt = CASE WHEN run.suspension_json ->> 'runnerAttempt' ~ '^[0-9]{1,9}$'
                                 THEN (run.suspension_json ->> 'runnerAttempt')::integer END
      AND run.suspension_json ->> 'kind' = 'detached_runner'
      AND attempt.status IN ('running', 'waiting')
      AND attempt.lease_token IS NOT NULL
      AND NOT {{newer_attempt_exists(attempt.run_id, attempt.attempt)}}
), unsettled AS (
    SELECT * FROM detached
    WHERE runner_result_status IN ('completed', 'failed')
    ORDER BY run_id
    LIMIT %(limit)s::integer
), stale AS (
    SELECT detached.*, row_number() OVER (PARTITION BY provider ORDER BY run_id) AS provider_rank
    FROM detached
    WHERE provider = ANY (%(providers)s::text[])
      AND no_runner_result
      AND attempt_status = 'waiting'
      AND run_status = 'waiting'
      AND (wait_deadline IS NULL OR wait_deadline > coalesce(%(now)s::timestamptz, clock_timestamp()))
      AND run_id > coalesce(%(after_run_ids)s::jsonb ->> provider, '')
      AND NOT EXISTS (
          SELECT 1 FROM __schema__.control AS cancel
          WHERE cancel.key = {{cancel_key(detached.run_id)}}
      )
      AND {{runner_deadline(suspension_json, heartbeat_at)}} <= coalesce(%(now)s::timestamptz, clock_timestamp())
)
SELECT 'settle' AS work, provider, release_id, run_id, attempt, lease_token,
       to_char(heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS heartbeat_identity,
       (extract(epoch FROM heartbeat_at) * 1000)::bigint AS heartbeat_at_ms,
       suspension_json
FROM unsettled
UNION ALL
SELECT 'inspect', provider, release_id, run_id, attempt, lease_token,
       to_char(heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       (extract(epoch FROM heartbeat_at) * 1000)::bigint,
       suspension_json
FROM stale
WHERE provider_rank <= %(limit)s::integer
ORDER BY run_id

-- fragment: receipt_fence()
-- RCP-1: the CTE every receipt statement starts with: the caller's run is open and its attempt (with its lease) is
-- the run's current one. The run row is share-locked first, as every writer takes the run lock first: a settlement
-- or a retry waits for this call to commit, and this call waits for them and then sees the run's new status.
fence AS MATERIALIZED (
    SELECT run.run_id
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
      AND run.status IN ('running', 'waiting')
      AND EXISTS (
          SELECT 1 FROM __schema__.attempts AS caller
          WHERE caller.run_id = run.run_id
            AND caller.attempt = %(attempt)s::integer
            AND caller.lease_token = %(lease_token)s::text
            AND caller.status IN ('claimed', 'running', 'waiting')
            AND NOT {{newer_attempt_exists(caller.run_id, caller.attempt)}}
      )
    FOR SHARE OF run
)

-- fragment: receipt_leased_items()
-- RCP-1: the CTE of a call whose items are (key, the receipt lease the caller names), in input order.
item AS (
    SELECT item.key, item.lease_id, item.position
    FROM unnest(%(keys)s::text[], %(lease_ids)s::text[]) WITH ORDINALITY AS item(key, lease_id, position)
)

-- fragment: receipt_claimable(receipt, attempt)
-- RCP-1: a receipt `attempt` may take: never one a newer attempt holds; a queued one; a running one whose lease
-- expired or belongs to an older attempt; a failed one an older attempt left, unless it was marked final.
(
    (receipt.run_attempt IS NULL OR receipt.run_attempt <= {attempt})
    AND (
        receipt.status = 'queued'
        OR (receipt.status = 'running'
            AND (receipt.run_attempt IS DISTINCT FROM {attempt}
                 OR receipt.lease_expires_at IS NULL OR receipt.lease_expires_at <= clock_timestamp()))
        OR (receipt.status = 'failed'
            AND receipt.run_attempt IS DISTINCT FROM {attempt}
            AND receipt.error_json -> 'final' IS DISTINCT FROM 'true'::jsonb)
    )
)

-- fragment: receipt_keys(receipt)
-- RCP-1: the call's keys as an index condition. Reached only through the item list, the generic plan read every
-- receipt of the run (5,000 per call on a long play) and hashed them.
{receipt}.key = ANY (%(keys)s::text[])

-- fragment: receipt_upsert(source, columns, assigned)
-- RCP-1: write receipts the caller may take (rows from `source`, in key order so batches lock alike); a missing key
-- is inserted, an existing one updated only when receipt_claimable says so (the row is locked, then re-checked).
INSERT INTO __schema__.receipts AS receipt
    (run_id, key, status, lease_id, lease_expires_at, run_attempt, output_json, error_json)
{source}
ON CONFLICT (run_id, key) DO UPDATE
SET {columns} = {assigned}
WHERE {{receipt_claimable(receipt, EXCLUDED.run_attempt)}}
RETURNING receipt.key, receipt.status, receipt.lease_id, receipt.lease_expires_at, receipt.run_attempt,
          receipt.output_json, receipt.error_json

-- fragment: receipt_held(columns, assigned)
-- RCP-1: change the receipts the caller still holds: running, its lease id, its attempt (a lease another claim took
-- over, or a completed receipt, is left alone: first write wins). Each finds its item by position (receipt_item):
-- a join with the item list, costed for one held receipt, compared every pair (1,000 keys: 190 ms with it, 77 without).
UPDATE __schema__.receipts AS receipt
SET {columns} = {assigned}
FROM fence
WHERE receipt.run_id = fence.run_id
  AND {{receipt_keys(receipt)}}
  AND receipt.status = 'running'
  AND receipt.lease_id = {{receipt_item(lease_ids, text)}}
  AND receipt.run_attempt = %(attempt)s::integer
RETURNING receipt.key, receipt.status, receipt.lease_id, receipt.lease_expires_at, receipt.run_attempt,
          receipt.output_json, receipt.error_json

-- fragment: receipt_item(values, type)
-- RCP-1: inside receipt_held, the held receipt's own entry of the call's array `values` (keys are unique in a call).
(%({values})s::{type}[])[array_position(%(keys)s::text[], receipt.key)]

-- fragment: receipt_answer(written, with_output)
-- RCP-1: one row per item in input order: whether the attempt is current, whether this call wrote the key, and the
-- receipt as it stands (a row another transaction wrote after this statement began reads as missing; the caller
-- treats it as held). A lease id is returned only when this call wrote it: another holder's lease stays secret.
SELECT item.position, item.key,
       EXISTS (SELECT 1 FROM fence) AS current,
       {written}.key IS NOT NULL AS changed,
       coalesce({written}.status, existing.status) AS status,
       {written}.lease_id,
       CASE WHEN {written}.key IS NOT NULL THEN {written}.lease_expires_at ELSE existing.lease_expires_at END
           AS lease_expires_at,
       CASE WHEN {written}.key IS NOT NULL THEN {written}.run_attempt ELSE existing.run_attempt END AS run_attempt,
       CASE WHEN {with_output} AND coalesce({written}.status, existing.status) = 'completed'
            THEN CASE WHEN {written}.key IS NOT NULL THEN {written}.output_json ELSE existing.output_json END
       END AS output,
       CASE WHEN {written}.key IS NOT NULL THEN {written}.error_json ELSE existing.error_json END AS error
FROM item
LEFT JOIN {written} ON {written}.key = item.key
LEFT JOIN __schema__.receipts AS existing
    ON existing.run_id = %(run_id)s::text AND existing.key = item.key AND {{receipt_keys(existing)}}
ORDER BY item.position

-- fragment: parked_verdict_write(run)
-- SWP-4, TRM-2: what a verdict writes on the parked attempt it judged: the result, the log payload only for a
-- planet_scale run, and, as the seed's verdict does, the verdict itself as the attempt's last liveness fact.
runner_result_json = %(result)s::jsonb,
runner_log_payload_json = CASE WHEN {run}.run_log_store = 'planet_scale' THEN %(log_payload)s::jsonb END,
runner_terminal_received_at = clock_timestamp(),
heartbeat_at = now(),
updated_at = now()
