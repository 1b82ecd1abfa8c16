-- name: operator_actions_record
-- Append one operator action to the audit trail (who, what, on what, why, what came of it), in the repair's own transaction.
INSERT INTO __schema__.operator_actions (actor, action, target, reason, outcome, changed, created_at)
VALUES (%(actor)s::text, %(action)s::text, %(target)s::text, %(reason)s::text, %(outcome)s::text,
        %(changed)s::boolean, now())
RETURNING id;

-- name: runs_list_page
-- One page of runs, newest first, after a keyset cursor (created_at, run_id), filtered by status, org, release, play, creation time and why a queued run waits (FSH-9); each filter optional (RUN-8's list).
-- plan: custom
SELECT run.run_id, run.org_id, run.status, run.play_name, nullif(run.launch_json ->> 'absurdReleaseId', '') AS release_id,
       run.created_at, run.finished_at, run.max_attempts,
       (SELECT max(attempt.attempt) FROM __schema__.attempts AS attempt WHERE attempt.run_id = run.run_id) AS attempts,
       run.terminal_result_json -> 'error' ->> 'code' AS error_code,
       {{queued_because(run, %(default_max_active)s::integer)}} AS queued_because
FROM __schema__.runs AS run
WHERE (%(status)s::text IS NULL OR run.status = %(status)s::text)
  AND (%(org_id)s::text IS NULL OR run.org_id = %(org_id)s::text)
  AND (%(release_id)s::text IS NULL OR run.launch_json ->> 'absurdReleaseId' = %(release_id)s::text)
  AND (%(play_name)s::text IS NULL OR run.play_name = %(play_name)s::text)
  AND (%(created_after)s::timestamptz IS NULL OR run.created_at > %(created_after)s::timestamptz)
  AND (%(queued_because)s::text IS NULL
       OR ((run.status = 'queued' OR {{durable_wait(run)}})
           AND {{queued_because(run, %(default_max_active)s::integer)}} = %(queued_because)s::text))
  AND (%(cursor_created_at)s::timestamptz IS NULL
       OR (run.created_at, run.run_id) < (%(cursor_created_at)s::timestamptz, %(cursor_run_id)s::text))
ORDER BY run.created_at DESC, run.run_id DESC
LIMIT %(limit)s::integer;

-- name: runs_read_parked_attempt
-- The attempt a waiting run is parked on, with its lease and heartbeat identity: what an operator's "runner lost" verdict is fenced on, as the sweep's is (SWP-4).
SELECT run.run_id, attempt.attempt, attempt.lease_token,
       to_char(attempt.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS heartbeat_identity
FROM __schema__.runs AS run
JOIN __schema__.attempts AS attempt
  ON attempt.run_id = run.run_id AND to_jsonb(attempt.attempt) = run.suspension_json -> 'runnerAttempt'
WHERE run.run_id = %(run_id)s::text
  AND run.status = 'waiting'
  AND run.suspension_json ->> 'kind' = 'detached_runner';

-- name: sandbox_cleanup_redrive
-- Operator repair (CLN-4): a pending cleanup job that is backing off or waiting to read back becomes due now; a job another worker holds keeps its lease.
UPDATE __schema__.sandbox_cleanup_jobs_v2 AS job
SET available_at = now(), updated_at = now()
WHERE job.provider = %(provider)s::text AND job.sandbox_id = %(sandbox_id)s::text
  AND job.routing_domain_key = coalesce(%(routing_domain)s::text, '') AND job.status = 'pending'
  AND job.available_at > now()
  AND (job.lease_owner IS NULL OR job.lease_expires_at <= now())
RETURNING job.sandbox_id;
