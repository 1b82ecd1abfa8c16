-- Reads the seed's backend offers callers beside the state changes: each a plain SELECT, never a fence.

-- name: attempts_read_liveness
-- The runner liveness of one attempt, for timeout diagnosis: heartbeat time, its microsecond identity (the verdict fence's value), updated_at and status (observability only).
SELECT attempt.heartbeat_at,
       to_char(attempt.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS heartbeat_identity,
       attempt.updated_at, attempt.status
FROM __schema__.attempts AS attempt
WHERE attempt.run_id = %(run_id)s::text AND attempt.attempt = %(attempt)s::integer;

-- name: runs_read_terminal_array_input_intent
-- RUN-6, SCH-3: a terminal run's array-input intent and play name, bound to its org when one is given; only after the catalog shows the column.
SELECT run.play_name, run.array_input_started AS started
FROM __schema__.runs AS run
WHERE run.run_id = %(run_id)s::text
  AND (%(org_id)s::text IS NULL OR run.org_id = %(org_id)s::text)
  AND run.status IN ('completed', 'failed', 'cancelled');

-- name: attempts_list_recorded_terminals_by_lane
-- TRM-7: recorded runner terminals on still-open attempts over several release lanes at once, at most lane_limit per lane, the lane of runs without a release included when asked.
-- plan: custom
WITH lane AS (
    SELECT DISTINCT requested.release_id
    FROM unnest(%(release_ids)s::text[]) AS requested(release_id)
    UNION ALL
    SELECT NULL WHERE %(include_unreleased)s::boolean
)
SELECT lane.release_id, terminal.run_id, terminal.attempt, terminal.lease_token, terminal.result,
       terminal.suspension_json
FROM lane
CROSS JOIN LATERAL (
    SELECT attempt.run_id, attempt.attempt, attempt.lease_token, attempt.runner_result_json AS result,
           run.suspension_json
    FROM __schema__.attempts AS attempt
    JOIN __schema__.runs AS run ON run.run_id = attempt.run_id
    WHERE run.status IN ('running', 'waiting')
      AND attempt.status IN ('claimed', 'running', 'waiting')
      AND attempt.runner_result_json ->> 'status' IN ('completed', 'failed')
      AND nullif(run.launch_json ->> 'absurdReleaseId', '') IS NOT DISTINCT FROM lane.release_id
    ORDER BY attempt.run_id
    LIMIT %(lane_limit)s::integer
) AS terminal
ORDER BY lane.release_id NULLS LAST, terminal.run_id;
