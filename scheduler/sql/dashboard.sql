-- name: dashboard_runs
-- The admin dashboard's run figures: queued, claimed but not parked, waiting on a runner, stuck (a parked runner past its heartbeat timeout, or a claim past its lease); each from a partial index, so history never makes them slower.
-- plan: custom
SELECT (SELECT count(*) FROM __schema__.runs WHERE status = 'queued') AS queued,
       (SELECT count(*) FROM __schema__.runs WHERE status = 'running') AS dispatching,
       (SELECT count(*) FROM __schema__.runs WHERE status = 'waiting') AS waiting,
       (SELECT count(*) FROM __schema__.runs AS run
        JOIN __schema__.attempts AS attempt
          ON attempt.run_id = run.run_id AND to_jsonb(attempt.attempt) = run.suspension_json -> 'runnerAttempt'
        WHERE run.status = 'waiting' AND attempt.status = 'waiting' AND attempt.runner_result_json IS NULL
          AND {{runner_deadline(run.suspension_json, attempt.heartbeat_at)}} < now()) AS stuck_runners,
       (SELECT count(*) FROM __schema__.attempts
        WHERE status IN ('claimed', 'running') AND lease_expires_at < now()) AS stuck_claims;

-- name: dashboard_failures
-- Runs failed in the last 24 hours, by error code, most first (from the failed-runs index on finished_at).
-- plan: custom
SELECT coalesce(terminal_result_json -> 'error' ->> 'code', 'unknown') AS code, count(*) AS runs
FROM __schema__.runs
WHERE status = 'failed' AND finished_at > now() - interval '24 hours'
GROUP BY 1
ORDER BY 2 DESC, 1
LIMIT 20;

-- name: dashboard_backlogs
-- The outbox, cleanup and billing backlogs: undelivered facts and the oldest one's age, failed heads, retrying facts; cleanup pending and blocked with the oldest; billing pending (each from a partial index).
-- plan: custom
SELECT (SELECT count(*) FROM __schema__.outbox WHERE delivered_at IS NULL) AS undelivered,
       (SELECT extract(epoch FROM now() - min(created_at)) FROM __schema__.outbox WHERE delivered_at IS NULL)
           AS oldest_undelivered_seconds,
       (SELECT count(*) FROM __schema__.outbox WHERE delivered_at IS NULL AND failed_at IS NOT NULL) AS failed_heads,
       (SELECT count(*) FROM __schema__.outbox
        WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at IS NOT NULL) AS retrying,
       (SELECT count(*) FROM __schema__.sandbox_cleanup_jobs_v2 WHERE status = 'pending') AS cleanup_pending,
       (SELECT min(created_at) FROM __schema__.sandbox_cleanup_jobs_v2 WHERE status = 'pending') AS cleanup_oldest_pending,
       (SELECT count(*) FROM __schema__.sandbox_cleanup_jobs_v2 WHERE status = 'blocked') AS cleanup_blocked,
       (SELECT count(*) FROM __schema__.compute_billing_jobs_v2 WHERE status = 'pending') AS billing_pending;

-- name: runs_list_stuck
-- The runs behind the dashboard's stuck figures, newest first: a parked runner past its heartbeat timeout (`runner`), or a claim whose lease expired before it parked (`claim`).
-- plan: custom
SELECT run.run_id
FROM __schema__.runs AS run
JOIN __schema__.attempts AS attempt
  ON attempt.run_id = run.run_id AND to_jsonb(attempt.attempt) = run.suspension_json -> 'runnerAttempt'
WHERE %(kind)s::text = 'runner'
  AND run.status = 'waiting' AND attempt.status = 'waiting' AND attempt.runner_result_json IS NULL
  AND {{runner_deadline(run.suspension_json, attempt.heartbeat_at)}} < now()
UNION
SELECT attempt.run_id
FROM __schema__.attempts AS attempt
WHERE %(kind)s::text = 'claim'
  AND attempt.status IN ('claimed', 'running') AND attempt.lease_expires_at < now()
LIMIT %(limit)s::integer;

-- name: replica_lag
-- RET-5: on the replica, how far its replay is behind (0 once it has replayed all it received); null on a primary.
SELECT CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0.0
            ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0.0)::double precision
       END AS lag_seconds;
