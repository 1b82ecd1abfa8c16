-- Fragments of retention (RET): the obligations that keep a finished run past retention, spelled once for the
-- prune (which skips such runs) and the held counts (which say why they are kept).

-- fragment: undelivered_facts(run_id)
-- RET-1: a fact of the run not yet delivered (pending, leased or failed): the ledger has not seen it.
EXISTS (SELECT 1 FROM __schema__.outbox AS fact WHERE fact.run_id = {run_id} AND fact.delivered_at IS NULL)

-- fragment: cleanup_open(run_id)
-- RET-1, RET-4: a sandbox of the run not confirmed deleted: a v2 job or a legacy row not deleted, or an attempt that never parked and may have left one (CLN-1).
(EXISTS (SELECT 1 FROM __schema__.sandbox_cleanup_jobs_v2 AS job WHERE job.run_id = {run_id} AND job.status <> 'deleted')
 OR EXISTS (SELECT 1 FROM __schema__.sandbox_cleanup_jobs AS legacy
            WHERE legacy.run_id = {run_id} AND legacy.status <> 'deleted')
 OR EXISTS (SELECT 1 FROM __schema__.attempts AS unparked
            JOIN __schema__.control AS unreconciled
              ON unreconciled.key = {{unreconciled_key(unparked.run_id, unparked.attempt)}}
            WHERE unparked.run_id = {run_id}))

-- fragment: billing_open(run_id)
-- RET-1: the run's billing job is not finalized.
EXISTS (SELECT 1 FROM __schema__.compute_billing_jobs_v2 AS bill WHERE bill.run_id = {run_id} AND bill.status <> 'finalized')
