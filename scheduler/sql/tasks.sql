-- name: tasks_read_result
-- TSK-3: a task's run and each of its attempts, oldest first (status, when it was claimed, the error it ended with): what get_result maps to a TaskResult.
SELECT run.run_id, run.status, run.launch_json -> 'play' AS play, run.input_json, run.terminal_result_json,
       run.priority, run.run_after, run.created_at, run.started_at, run.finished_at,
       coalesce(attempts.list, '[]'::jsonb) AS attempts, attempts.last_attempted_at
FROM __schema__.runs AS run
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object('attempt', attempt.attempt, 'status', attempt.status,
                                        'error', attempt.runner_result_json -> 'error')
                     ORDER BY attempt.attempt) AS list,
           max(attempt.created_at) AS last_attempted_at
    FROM __schema__.attempts AS attempt
    WHERE attempt.run_id = run.run_id
) AS attempts ON true
WHERE run.run_id = %(run_id)s::text;

-- name: tasks_metrics
-- TSK-3: for /metrics: the tasks not yet finished, by queue and by what get_result answers for them (READY while queued, RUNNING from claim to verdict); only active runs are read.
SELECT coalesce(run.launch_json -> 'play' ->> 'queueName', 'default') AS queue,
       CASE run.status WHEN 'queued' THEN 'READY' ELSE 'RUNNING' END AS status,
       count(*) AS tasks
FROM __schema__.runs AS run
WHERE run.status IN ('queued', 'running', 'waiting') AND run.launch_json -> 'play' ? 'task'
GROUP BY 1, 2
ORDER BY 1, 2;
