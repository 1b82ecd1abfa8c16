-- name: retention_prune_runs
-- RET-1, RET-3, RET-4: pick up to `batch` runs finished before the cutoff whose every obligation is met (facts delivered, sandboxes confirmed deleted, billing finalized), oldest first through the finished index, from after the last run the previous batch of this pass picked (null: from the oldest; so runs held past retention are walked once a pass, not once a batch); lock them SKIP LOCKED in run-id order; delete each with every row of its own (attempts, facts, receipts, durable waits and events sent to it, late results, control keys, cleanup jobs, tombstones, events and legacy rows, its billing job, built-in ledger events), children first, and unlink its schedule fire; a run is wholly kept or wholly gone. Its transaction sets scheduler.pruning (the tombstone guards allow this delete only).
-- plan: custom
-- (Planned for its values, a null position folds away and a given one is the finished index's lower bound.)
WITH candidate AS MATERIALIZED (
    SELECT run.run_id, run.finished_at
    FROM __schema__.runs AS run
    WHERE run.status IN ('completed', 'failed', 'cancelled') AND run.finished_at < %(cutoff)s::timestamptz
      AND (%(after_finished_at)s::timestamptz IS NULL
           OR (run.finished_at, run.run_id) > (%(after_finished_at)s::timestamptz, %(after_run_id)s::text))
      AND NOT {{undelivered_facts(run.run_id)}}
      AND NOT {{cleanup_open(run.run_id)}}
      AND NOT {{billing_open(run.run_id)}}
    ORDER BY run.finished_at, run.run_id
    LIMIT %(batch)s
), locked AS MATERIALIZED (
    SELECT run.run_id FROM __schema__.runs AS run
    WHERE run.run_id IN (SELECT candidate.run_id FROM candidate)
    ORDER BY run.run_id
    FOR UPDATE SKIP LOCKED
), unreconciled_keys AS MATERIALIZED (
    SELECT {{unreconciled_key(attempt.run_id, attempt.attempt)}} AS key
    FROM __schema__.attempts AS attempt WHERE attempt.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked))
), gone_control AS (
    DELETE FROM __schema__.control AS control
    WHERE control.key = ANY (ARRAY(SELECT {{cancel_key(locked.run_id)}} FROM locked
                                   UNION ALL SELECT unreconciled_keys.key FROM unreconciled_keys))
    RETURNING 1
), gone_attempts AS (
    DELETE FROM __schema__.attempts AS attempt WHERE attempt.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_facts AS (
    DELETE FROM __schema__.outbox AS fact WHERE fact.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_receipts AS (
    DELETE FROM __schema__.receipts AS receipt WHERE receipt.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_waits AS (
    DELETE FROM __schema__.run_waits AS wait WHERE wait.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_run_events AS (
    DELETE FROM __schema__.run_events AS sent WHERE sent.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_late AS (
    DELETE FROM __schema__.late_runner_results AS late WHERE late.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_events AS (
    DELETE FROM __schema__.sandbox_cleanup_events_v2 AS event WHERE event.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_jobs AS (
    DELETE FROM __schema__.sandbox_cleanup_jobs_v2 AS job WHERE job.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_legacy AS (
    DELETE FROM __schema__.sandbox_cleanup_jobs AS legacy WHERE legacy.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_billing AS (
    DELETE FROM __schema__.compute_billing_jobs_v2 AS bill WHERE bill.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), gone_ledger AS (
    DELETE FROM __schema__.run_ledger_events AS ledger WHERE ledger.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING 1
), unlinked_fires AS (
    UPDATE __schema__.schedule_fires AS fire SET run_id = NULL
    WHERE fire.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked))
    RETURNING 1
), gone_runs AS (
    DELETE FROM __schema__.runs AS run WHERE run.run_id = ANY (ARRAY(SELECT locked.run_id FROM locked)) RETURNING run.run_id
)
SELECT (SELECT count(*) FROM gone_runs) AS runs,
       (SELECT count(*) FROM candidate) AS candidates,
       (SELECT candidate.finished_at FROM candidate ORDER BY candidate.finished_at DESC, candidate.run_id DESC LIMIT 1)
           AS last_finished_at,
       (SELECT candidate.run_id FROM candidate ORDER BY candidate.finished_at DESC, candidate.run_id DESC LIMIT 1)
           AS last_run_id,
       (SELECT count(*) FROM gone_attempts) + (SELECT count(*) FROM gone_facts) + (SELECT count(*) FROM gone_receipts)
       + (SELECT count(*) FROM gone_late) + (SELECT count(*) FROM gone_control) + (SELECT count(*) FROM gone_events)
       + (SELECT count(*) FROM gone_jobs) + (SELECT count(*) FROM gone_legacy) + (SELECT count(*) FROM gone_billing)
       + (SELECT count(*) FROM gone_ledger) + (SELECT count(*) FROM gone_waits) + (SELECT count(*) FROM gone_run_events)
           AS rows,
       (SELECT count(*) FROM unlinked_fires) AS fires_unlinked;

-- name: retention_prune_billing_items
-- RET-2: delete up to `batch` billing items created before their own cutoff, oldest first through the created index (they outlive their runs).
-- plan: custom
WITH old_item AS MATERIALIZED (
    SELECT item.adjustment_session_id FROM __schema__.billing_items AS item
    WHERE item.created_at < %(cutoff)s::timestamptz
    ORDER BY item.created_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM __schema__.billing_items AS item
WHERE item.adjustment_session_id IN (SELECT old_item.adjustment_session_id FROM old_item);

-- name: retention_held
-- RET-1: finished runs past the cutoff that pruning keeps, counted by each obligation still open (a run may hold more than one): what the dashboard and /metrics show.
-- plan: custom
SELECT count(*) FILTER (WHERE held.undelivered) AS undelivered_facts,
       count(*) FILTER (WHERE held.cleanup) AS cleanup_pending,
       count(*) FILTER (WHERE held.billing) AS billing_unfinalized
FROM (
    SELECT {{undelivered_facts(run.run_id)}} AS undelivered, {{cleanup_open(run.run_id)}} AS cleanup,
           {{billing_open(run.run_id)}} AS billing
    FROM __schema__.runs AS run
    WHERE run.status IN ('completed', 'failed', 'cancelled') AND run.finished_at < %(cutoff)s::timestamptz
) AS held;

-- name: retention_held_run_ids
-- RET-1: the ids of up to `limit` finished runs past the cutoff that one obligation keeps (the dashboard's links open them in the runs list).
-- plan: custom
SELECT run.run_id
FROM __schema__.runs AS run
WHERE run.status IN ('completed', 'failed', 'cancelled') AND run.finished_at < %(cutoff)s::timestamptz
  AND CASE %(reason)s::text
          WHEN 'undelivered_facts' THEN {{undelivered_facts(run.run_id)}}
          WHEN 'cleanup_pending' THEN {{cleanup_open(run.run_id)}}
          WHEN 'billing_unfinalized' THEN {{billing_open(run.run_id)}}
      END
ORDER BY run.finished_at, run.run_id
LIMIT %(limit)s;

-- name: retention_begin_prune
-- RET-1, RET-3: mark this transaction as the prune (the tombstone and event-log guards allow its deletes) and bound it: a prune never waits long on a lock or runs past its tick's deadline.
SELECT set_config('scheduler.pruning', 'on', true), set_config('statement_timeout', %(statement_timeout)s::text, true),
       set_config('lock_timeout', %(lock_timeout)s::text, true);
