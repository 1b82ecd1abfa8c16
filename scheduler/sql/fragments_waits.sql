-- Fragments of durable waits (WAIT): what the wait statements, the claim's counts and the reads spell alike.

-- fragment: durable_wait(run)
-- WAIT-2: a run waiting durably (for an event or a timer, its sandbox released), as opposed to one parked on its
-- detached runner; word for word the predicate of migration 0042's durable-wait index.
({run}.status = 'waiting' AND ({run}.suspension_json ->> 'kind') IN ('event', 'timer'))

-- fragment: holds_slot(run)
-- FSH-1, WAIT-6: a run that holds one of its org's active slots: running, or waiting on its runner; a durably
-- waiting run holds none. Word for word the predicate of migration 0042's org holding index; its statuses are
-- spelled as those it is not (the status check leaves running and waiting), so that the older active index, which
-- lists the durably waiting runs too, cannot serve it (migration 0042 says why).
({run}.status NOT IN ('queued', 'completed', 'failed', 'cancelled')
 AND coalesce({run}.suspension_json ->> 'kind', '') NOT IN ('event', 'timer'))

-- fragment: run_locked_for_wait()
-- WAIT-3, WAIT-7: the CTE a statement that may end a wait starts with: the run, locked as every writer of it locks it
-- first; its status and suspension read from the locked row, the latest committed.
locked_run AS MATERIALIZED (
    SELECT run.run_id, run.status, run.suspension_json
    FROM __schema__.runs AS run
    WHERE run.run_id = %(run_id)s::text
    FOR NO KEY UPDATE
)

-- fragment: wait_ceiling(suspension)
-- WAIT-2: the launch's own wait deadline (the parked runner's ceiling, SWP-7), kept in a durable suspension while its
-- wait_deadline is the wait's, and given back when the run resumes.
(({suspension}) ->> 'ceiling')::timestamptz

-- fragment: resumed_fact(source, fact_time)
-- WAIT-5: the run.resumed fact of each row of `source` (run_id, attempt: the suspended one, reason, event_id), once
-- per suspension by its event id.
INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
SELECT {source}.run_id || ':' || {source}.attempt || ':run.resumed', {source}.run_id, 'run.resumed',
       jsonb_build_object('runId', {source}.run_id, 'attempt', {source}.attempt, 'reason', {source}.reason)
       || CASE WHEN {source}.event_id IS NULL THEN '{}'::jsonb
               ELSE jsonb_build_object('eventId', {source}.event_id) END,
       'ledger', {fact_time}
FROM {source}
ON CONFLICT (event_id) DO NOTHING

-- fragment: resume_runs(woken)
-- WAIT-3, WAIT-4: queue again each durably waiting run `woken` names (run_id, attempt, reason, event_id), its launch's
-- ceiling given back, with its run.resumed fact; the queued trigger wakes the dispatchers, whose next attempt resumes
-- the play. The caller locked each row and found it waiting durably: that locked row is the latest, and the only
-- test (this UPDATE's scan reads the statement's snapshot, which may predate the suspension it ends).
resumed_run AS (
    UPDATE __schema__.runs AS run
    SET status = 'queued', suspension_json = NULL, wait_deadline = {{wait_ceiling(run.suspension_json)}},
        updated_at = now()
    FROM {woken}
    WHERE run.run_id = {woken}.run_id
    RETURNING run.run_id
), resumed_fact AS (
    {{resumed_fact({woken}, __schema__.next_fact_time({woken}.run_id, 0))}}
)
