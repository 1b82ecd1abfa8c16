-- Fragments: SQL spelled once and spliced into blocks as {{name(arguments)}} when the files load.
-- Each stands for one definition that several statements must share exactly; a test holds every
-- block to them (no block spells one out by hand).

-- fragment: newer_attempt_exists(run_id, attempt)
-- requirements §1.2: "a newer attempt exists" is a higher attempt in a fencing status (a released claim does not fence).
EXISTS (
    SELECT 1 FROM __schema__.attempts AS newer
    WHERE newer.run_id = {run_id} AND newer.attempt > {attempt}
      AND newer.status IN ('claimed', 'running', 'waiting', 'completed', 'failed')
)

-- fragment: newer_attempt_row_exists(run_id, attempt)
-- RUN-5 only: an attempt is superseded once any higher attempt row exists, a released claim included. A read,
-- never a fence: every fence uses newer_attempt_exists.
EXISTS (SELECT 1 FROM __schema__.attempts AS newer WHERE newer.run_id = {run_id} AND newer.attempt > {attempt})

-- fragment: cancel_key(run_id)
-- RUN-7: the control key of a queued cancel.
('runtime_cancel:' || {run_id})

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

-- fragment: acknowledge_facts(event_ids, lease_owner)
-- OBX-6: a delivered prefix is acknowledged: delivered, lease cleared, only on facts this drainer still holds.
UPDATE __schema__.outbox AS fact
SET delivered_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL
WHERE fact.event_id = ANY ({event_ids})
  AND fact.lease_owner = {lease_owner}
  AND fact.delivered_at IS NULL
RETURNING fact.event_id

-- fragment: store_ledger_events(events)
-- OBX-10: the built-in receiver stores ledger events idempotently by event id.
INSERT INTO __schema__.run_ledger_events (event_id, run_id, event_type, occurred_at, payload_json)
SELECT event.event_id, event.run_id, event.event_type, event.occurred_at, event.payload
FROM jsonb_to_recordset({events})
     AS event(event_id text, run_id text, event_type text, occurred_at timestamptz, payload jsonb)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id

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
