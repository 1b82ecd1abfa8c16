-- Durable waits (WAIT-1..6): a play waits for an event or a time with its sandbox released. The play's wait step
-- begins (waits_begin), the runner's suspended result settles the attempt (attempts_suspend), and an event
-- (run_events_send) or a due deadline (runs_wake_due_waits) queues the run again; its next attempt replays the play.

-- name: waits_begin
-- WAIT-1: begin, or replay, the durable wait `key` of the caller's current attempt, fenced like every receipt call (run open, attempt current with its lease): a satisfied wait answers its stored result; otherwise the wait is recorded once (the first recording's kind, event name and deadline are kept whatever a replay asks, so a retry never extends a wait), and the oldest event of its name not yet consumed is consumed and stored as its result, or a passed deadline stores the timeout marker; else it answers suspend with the wait. A key a step holds, or a recorded wait of another kind or name, answers conflict and writes nothing.
-- plan: generic
WITH {{receipt_fence()}},
prior AS MATERIALIZED (
    SELECT receipt.status, receipt.output_json
    FROM __schema__.receipts AS receipt
    WHERE receipt.run_id = (SELECT fence.run_id FROM fence) AND receipt.key = %(key)s::text
), recorded AS MATERIALIZED (
    SELECT recorded.kind, recorded.event_name, recorded.deadline
    FROM __schema__.run_waits AS recorded
    WHERE recorded.run_id = (SELECT fence.run_id FROM fence) AND recorded.key = %(key)s::text
), wait AS MATERIALIZED (
    SELECT fence.run_id,
           coalesce(recorded.kind, %(kind)s::text) AS kind,
           CASE WHEN recorded.kind IS NULL THEN %(event_name)s::text ELSE recorded.event_name END AS event_name,
           CASE WHEN recorded.kind IS NULL
                THEN coalesce(%(until)s::timestamptz,
                              clock_timestamp() + make_interval(secs => %(delay_ms)s::double precision / 1000))
                ELSE recorded.deadline END AS deadline,
           CASE WHEN prior.status = 'completed' AND recorded.kind IS NOT NULL THEN 'done'
                WHEN prior.status IS NOT NULL THEN 'conflict'
                WHEN recorded.kind IS NOT NULL
                     AND (recorded.kind <> %(kind)s::text
                          OR recorded.event_name IS DISTINCT FROM %(event_name)s::text) THEN 'conflict'
                ELSE 'open' END AS standing
    FROM fence
    LEFT JOIN recorded ON true
    LEFT JOIN prior ON true
), event AS MATERIALIZED (
    SELECT sent.event_id, sent.name, sent.payload_json
    FROM __schema__.run_events AS sent
    JOIN wait ON sent.run_id = wait.run_id AND sent.name = wait.event_name
    WHERE sent.consumed_key IS NULL AND wait.kind = 'event' AND wait.standing = 'open'
    ORDER BY sent.received_at, sent.event_id
    LIMIT 1
    FOR UPDATE OF sent
), answer AS MATERIALIZED (
    SELECT wait.run_id, wait.kind, wait.event_name, wait.deadline, wait.standing, event.event_id,
           CASE WHEN wait.standing <> 'open' THEN NULL
                WHEN event.event_id IS NOT NULL
                    THEN jsonb_build_object('event', jsonb_build_object('name', event.name, 'eventId', event.event_id,
                                                                        'payload', event.payload_json))
                WHEN wait.deadline <= clock_timestamp() THEN jsonb_build_object('timedOut', true)
           END AS output
    FROM wait
    LEFT JOIN event ON true
), written_wait AS (
    INSERT INTO __schema__.run_waits AS written (run_id, key, kind, event_name, deadline, attempt, satisfied_at)
    SELECT answer.run_id, %(key)s::text, answer.kind, answer.event_name, answer.deadline, %(attempt)s::integer,
           CASE WHEN answer.output IS NOT NULL THEN clock_timestamp() END
    FROM answer
    WHERE answer.standing = 'open'
    ON CONFLICT (run_id, key) DO UPDATE SET satisfied_at = excluded.satisfied_at
    WHERE written.satisfied_at IS NULL AND excluded.satisfied_at IS NOT NULL
), consumed AS (
    UPDATE __schema__.run_events AS sent
    SET consumed_key = %(key)s::text, consumed_at = clock_timestamp()
    FROM answer
    WHERE sent.run_id = answer.run_id AND sent.event_id = answer.event_id
), stored AS (
    -- The wait's result is the key's completed receipt: a replay, in this sandbox or the next, reads it back.
    INSERT INTO __schema__.receipts (run_id, key, status, run_attempt, output_json)
    SELECT answer.run_id, %(key)s::text, 'completed', %(attempt)s::integer, answer.output
    FROM answer
    WHERE answer.output IS NOT NULL
    ON CONFLICT (run_id, key) DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM fence) AS current,
       CASE WHEN answer.standing = 'conflict' THEN 'conflict'
            WHEN answer.standing = 'done' OR answer.output IS NOT NULL THEN 'completed'
            WHEN answer.standing = 'open' THEN 'suspend' END AS outcome,
       CASE WHEN answer.standing = 'done' THEN (SELECT prior.output_json FROM prior) ELSE answer.output END AS output,
       answer.kind, answer.event_name, answer.deadline
FROM (SELECT 1) AS one
LEFT JOIN answer ON true;

-- name: attempts_suspend
-- WAIT-2: the runner's suspended result, in one statement: fenced as a terminal is (run lock, then the attempt's; its own lease; current: active, no result, no newer attempt), on an open wait of that key: the attempt is settled suspended with the result (not failed, not counted against max_attempts); the run waits durably with the wait's kind, key and deadline in its suspension (its launch's own ceiling kept there), or is queued again at once when its event is already there or its deadline passed, or is cancelled when a cancel is queued (with its billing job); the parked sandbox gets its cleanup obligation (its billing span ends at the delete's acceptance, CLN-5); run.suspended, then run.resumed or run.cancelled. Answers as attempts_settle does, with the outcome.
WITH locked_run AS MATERIALIZED (
    SELECT run.run_id, run.status, run.suspension_json, run.launch_json, run.wait_deadline,
           run.runtime_resources_json
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
    FOR NO KEY UPDATE
), target AS MATERIALIZED (
    SELECT attempt.run_id, attempt.attempt, locked_run.suspension_json, locked_run.launch_json,
           locked_run.wait_deadline, locked_run.runtime_resources_json,
           coalesce(attempt.lease_token = %(lease_token)s::text, false) AS lease_matches,
           attempt.runner_result_json IS NOT NULL AS has_result,
           attempt.runner_result_json IS NULL
               AND attempt.status IN ('claimed', 'running', 'waiting')
               AND locked_run.status IN ('running', 'waiting')
               AND NOT {{newer_attempt_exists(attempt.run_id, attempt.attempt)}} AS current
    FROM __schema__.attempts AS attempt
    JOIN locked_run ON locked_run.run_id = attempt.run_id
    WHERE attempt.attempt = %(attempt)s::integer
    FOR NO KEY UPDATE OF attempt
), verdict AS MATERIALIZED (
    SELECT target.run_id, target.attempt, target.suspension_json, target.launch_json, target.runtime_resources_json,
           -- The launch's ceiling: the run's wait deadline unless an older durable suspension kept it aside.
           target.wait_deadline AS ceiling,
           wait.key, wait.kind, wait.event_name, wait.deadline, wakers.found -> 'cancel' ->> 'reason' AS cancel_reason,
           CASE WHEN wakers.found ? 'cancel' AND jsonb_typeof(wakers.found -> 'cancel') = 'object' THEN 'cancelled'
                WHEN wakers.found ->> 'eventId' IS NOT NULL OR wait.deadline <= clock_timestamp() THEN 'resumed'
                ELSE 'waiting' END AS outcome,
           CASE WHEN wakers.found ->> 'eventId' IS NOT NULL THEN 'event' ELSE 'deadline' END AS reason,
           wakers.found ->> 'eventId' AS event_id,
           __schema__.next_fact_time(target.run_id, 0) AS fact_base
    FROM target
    JOIN __schema__.run_waits AS wait
      ON wait.run_id = target.run_id AND wait.key = %(key)s::text AND wait.satisfied_at IS NULL
    -- Read with a fresh snapshot, the run's lock held: an event or a cancel that committed while this statement
    -- waited for the lock is seen (this statement's own snapshot predates them).
    CROSS JOIN LATERAL (SELECT __schema__.wait_wakers(target.run_id,
                                                      CASE WHEN wait.kind = 'event' THEN wait.event_name END) AS found
                        OFFSET 0) AS wakers
    WHERE target.current AND target.lease_matches
), written_attempt AS (
    UPDATE __schema__.attempts AS attempt
    SET status = 'suspended', runner_result_json = %(result)s::jsonb,
        runner_terminal_received_at = clock_timestamp(), finished_at = now(), updated_at = now()
    FROM verdict
    WHERE attempt.run_id = verdict.run_id AND attempt.attempt = verdict.attempt
), run_after AS (
    UPDATE __schema__.runs AS run
    SET status = CASE verdict.outcome WHEN 'waiting' THEN 'waiting' WHEN 'resumed' THEN 'queued' ELSE 'cancelled' END,
        suspension_json = CASE WHEN verdict.outcome = 'waiting' THEN jsonb_strip_nulls(jsonb_build_object(
            'kind', verdict.kind, 'key', verdict.key, 'event', verdict.event_name, 'attempt', verdict.attempt,
            'until', verdict.deadline, 'suspendedAt', clock_timestamp(), 'ceiling', verdict.ceiling)) END,
        wait_deadline = CASE WHEN verdict.outcome = 'waiting' THEN verdict.deadline ELSE verdict.ceiling END,
        terminal_result_json = CASE WHEN verdict.outcome = 'cancelled'
            THEN jsonb_build_object('status', 'cancelled', 'reason', verdict.cancel_reason)
            ELSE run.terminal_result_json END,
        finished_at = CASE WHEN verdict.outcome = 'cancelled' THEN now() ELSE run.finished_at END,
        updated_at = now()
    FROM verdict
    WHERE run.run_id = verdict.run_id
    RETURNING run.run_id, run.status
), parked_sandbox AS (
    {{ended_attempt_sandbox(verdict)}}
), cleanup_obligation AS (
    {{cleanup_obligations_insert(parked_sandbox)}}
), unparked_runner AS (
    {{unparked_runner_hint(verdict, true)}}
), billing_job AS (
    -- The sandbox this attempt parked gets its cleanup obligation in this statement: its delete is not accepted yet.
    INSERT INTO __schema__.compute_billing_jobs_v2 (run_id, available_at)
    SELECT verdict.run_id, {{billing_job_available_at(verdict.runtime_resources_json)}}
    FROM verdict WHERE verdict.outcome = 'cancelled'
    ON CONFLICT (run_id) DO NOTHING
), suspended_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT verdict.run_id || ':' || verdict.attempt || ':run.suspended', verdict.run_id, 'run.suspended',
           jsonb_build_object('runId', verdict.run_id, 'attempt', verdict.attempt, 'wait', jsonb_strip_nulls(
               jsonb_build_object('kind', verdict.kind, 'key', verdict.key, 'event', verdict.event_name,
                                  'until', verdict.deadline))),
           'ledger', verdict.fact_base
    FROM verdict
    ON CONFLICT (event_id) DO NOTHING
), resumed AS (
    SELECT verdict.run_id, verdict.attempt, verdict.reason, verdict.event_id, verdict.fact_base
    FROM verdict WHERE verdict.outcome = 'resumed'
), resumed_fact AS (
    {{resumed_fact(resumed, resumed.fact_base + interval '1 microsecond')}}
), cancelled_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT verdict.run_id || ':run.cancelled', verdict.run_id, 'run.cancelled',
           jsonb_build_object('runId', verdict.run_id, 'reason', verdict.cancel_reason),
           'ledger', verdict.fact_base + interval '1 microsecond'
    FROM verdict WHERE verdict.outcome = 'cancelled'
    ON CONFLICT (event_id) DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM target) AS attempt_exists,
       coalesce((SELECT target.lease_matches FROM target), false) AS lease_matches,
       coalesce((SELECT target.has_result AND target.lease_matches FROM target), false)
           OR EXISTS (SELECT 1 FROM verdict) AS recorded,
       EXISTS (SELECT 1 FROM verdict) AS is_this_result,
       coalesce((SELECT target.current AND target.lease_matches FROM target), false) AS current,
       (SELECT run_after.status FROM run_after) AS run_status,
       (SELECT verdict.outcome FROM verdict) AS outcome;

-- name: run_events_send
-- WAIT-3: store an event for a run, idempotent by (run, event id), and in the same statement queue the run again when it waits durably for that name (run lock first, so an event, a suspension, a timer and a cancel of one run are taken one at a time: each suspension ends in one resume or one cancel). An event for a finished run, or a repeat of an event id with another name or payload, is not stored. Answers the run's status before, whether the id was known and with the same body, and what was stored and resumed.
WITH {{run_locked_for_wait()}}, prior AS MATERIALIZED (
    SELECT sent.name, sent.payload_json
    FROM __schema__.run_events AS sent
    WHERE sent.run_id = %(run_id)s::text AND sent.event_id = %(event_id)s::text
), stored AS (
    INSERT INTO __schema__.run_events (run_id, event_id, name, payload_json)
    SELECT locked_run.run_id, %(event_id)s::text, %(name)s::text, %(payload)s::jsonb
    FROM locked_run
    WHERE locked_run.status IN ('queued', 'running', 'waiting') AND NOT EXISTS (SELECT 1 FROM prior)
    RETURNING run_id
), woken AS MATERIALIZED (
    SELECT locked_run.run_id, (locked_run.suspension_json ->> 'attempt')::integer AS attempt, 'event'::text AS reason,
           %(event_id)s::text AS event_id
    FROM locked_run
    WHERE {{durable_wait(locked_run)}}
      AND locked_run.suspension_json ->> 'kind' = 'event'
      AND locked_run.suspension_json ->> 'event' = %(name)s::text
      AND NOT EXISTS (SELECT 1 FROM prior)
), {{resume_runs(woken)}}
SELECT locked_run.status AS run_status,
       EXISTS (SELECT 1 FROM prior) AS known,
       coalesce((SELECT prior.name = %(name)s::text AND prior.payload_json IS NOT DISTINCT FROM %(payload)s::jsonb
                 FROM prior), false) AS same_body,
       EXISTS (SELECT 1 FROM stored) AS stored,
       EXISTS (SELECT 1 FROM resumed_run) AS resumed
FROM (SELECT 1) AS one
LEFT JOIN locked_run ON true;

-- name: runs_wake_due_waits
-- WAIT-4: queue again the durably waiting runs whose deadline has passed, oldest deadline first, at most `limit`, through the durable-wait index (a tick over any number of waiting runs reads only the due ones), SKIP LOCKED so an event or a cancel holding a run is not waited for (it settles that run itself); each with its run.resumed fact. The resumed play's wait answers its timeout marker.
-- plan: generic
WITH woken AS MATERIALIZED (
    SELECT run.run_id, (run.suspension_json ->> 'attempt')::integer AS attempt, 'deadline'::text AS reason,
           NULL::text AS event_id
    FROM __schema__.runs AS run
    WHERE {{durable_wait(run)}}
      AND run.wait_deadline <= coalesce(%(now)s::timestamptz, now())
    ORDER BY run.wait_deadline, run.run_id
    LIMIT %(limit)s::integer
    FOR NO KEY UPDATE SKIP LOCKED
), {{resume_runs(woken)}}
SELECT count(*) AS woken,
       (SELECT extract(epoch FROM min(run.wait_deadline) - coalesce(%(now)s::timestamptz, now()))
        FROM __schema__.runs AS run
        WHERE {{durable_wait(run)}} AND run.wait_deadline > coalesce(%(now)s::timestamptz, now())) AS next_due_seconds
FROM resumed_run;

-- name: waits_metrics
-- WAIT-7: the durably waiting runs by kind, with how long the oldest has waited and how many are past their deadline (still waiting: no timer loop resumed them), for /metrics; read through the durable-wait index.
-- plan: custom
SELECT run.suspension_json ->> 'kind' AS kind, count(*) AS runs,
       coalesce(extract(epoch FROM now() - min(run.updated_at)), 0)::double precision AS oldest_seconds,
       count(*) FILTER (WHERE run.wait_deadline < now() - interval '10 seconds') AS overdue
FROM __schema__.runs AS run
WHERE {{durable_wait(run)}}
GROUP BY 1
ORDER BY 1;

-- name: waits_list_for_run
-- WAIT-7: a run's durable waits and the events sent to it, in the order they happened (the admin's run story).
SELECT 'wait' AS entry, wait.key AS name, wait.kind AS detail, wait.event_name AS event, wait.deadline,
       wait.attempt, wait.created_at AS at, wait.satisfied_at AS done_at
FROM __schema__.run_waits AS wait
WHERE wait.run_id = %(run_id)s::text
UNION ALL
SELECT 'event', sent.event_id, sent.name, sent.consumed_key, NULL, NULL, sent.received_at, sent.consumed_at
FROM __schema__.run_events AS sent
WHERE sent.run_id = %(run_id)s::text
ORDER BY at, name;

-- name: runs_end_wait_now
-- WAIT-7, an operator's repair: end a durably waiting run's wait now, as if its deadline had just passed: the open wait's deadline becomes now (never later than it was) and the run is queued again with its run.resumed fact (reason operator); its resumed play's wait answers the timeout marker. A run not waiting durably is left as it is. Answers the run's status before.
WITH {{run_locked_for_wait()}}, woken AS MATERIALIZED (
    SELECT locked_run.run_id, (locked_run.suspension_json ->> 'attempt')::integer AS attempt,
           'operator'::text AS reason, NULL::text AS event_id, locked_run.suspension_json ->> 'key' AS key
    FROM locked_run
    WHERE {{durable_wait(locked_run)}}
), ended_wait AS (
    UPDATE __schema__.run_waits AS wait
    SET deadline = least(wait.deadline, clock_timestamp())
    FROM woken
    WHERE wait.run_id = woken.run_id AND wait.key = woken.key AND wait.satisfied_at IS NULL
), {{resume_runs(woken)}}
SELECT locked_run.status AS run_status, EXISTS (SELECT 1 FROM resumed_run) AS resumed
FROM locked_run;
