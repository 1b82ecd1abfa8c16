-- name: runs_launch
-- Insert queued runs (with their priority, concurrency key and not-before: FSH-2, FSH-3, FSH-7) and their run.created facts, many in one statement, unless their release reads closed (RUN-1, ADM-5; the batch shares one release's keys) or a kept run of the org already holds the item's idempotency key (FSH-5, each item on its own); one answer per item, in input order; run after release_admission_lock in the same transaction.
-- plan: generic
WITH admission AS MATERIALIZED (
    SELECT admission.accepting
    FROM __schema__.runtime_release_admission AS admission
    WHERE admission.release_id = ANY (%(release_keys)s::text[])
    ORDER BY admission.admission_epoch DESC, admission.accepting ASC
    LIMIT 1
), item AS MATERIALIZED (
    SELECT *
    FROM unnest(%(run_ids)s::text[], %(org_ids)s::text[], %(play_names)s::text[], %(graph_hashes)s::text[],
                %(runtime_profiles)s::text[], %(definition_scopes)s::text[], %(launches)s::jsonb[],
                %(inputs)s::jsonb[], %(run_log_stores)s::text[], %(max_attempts)s::integer[],
                %(wait_deadlines)s::timestamptz[], %(idempotency_keys)s::text[], %(idempotency_digests)s::text[],
                %(priorities)s::smallint[], %(concurrency_keys)s::text[], %(concurrency_limits)s::integer[],
                %(run_afters)s::timestamptz[])
         WITH ORDINALITY AS item(run_id, org_id, play_name, graph_hash, runtime_profile, definition_scope, launch,
                                 input, run_log_store, max_attempts, wait_deadline, idempotency_key,
                                 idempotency_digest, priority, concurrency_key, concurrency_limit, run_after, position)
), inserted AS (
    INSERT INTO __schema__.runs (
        run_id, org_id, play_name, graph_hash, runtime_profile, definition_scope, status,
        launch_json, input_json, run_log_store, max_attempts, wait_deadline, idempotency_key, idempotency_digest,
        priority, concurrency_key, concurrency_limit, run_after, created_at, updated_at
    )
    SELECT item.run_id, item.org_id, item.play_name, item.graph_hash, item.runtime_profile, item.definition_scope,
           'queued', item.launch, item.input, item.run_log_store, item.max_attempts, item.wait_deadline,
           item.idempotency_key, item.idempotency_digest, item.priority, item.concurrency_key,
           item.concurrency_limit, item.run_after, now(), now()
    FROM item
    WHERE NOT EXISTS (SELECT 1 FROM admission WHERE NOT admission.accepting)
    ORDER BY item.position
    -- FSH-5: a concurrent duplicate waits for the first insert to commit, then inserts nothing.
    ON CONFLICT (org_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING run_id, org_id, play_name, created_at
), created_fact AS (
    INSERT INTO __schema__.outbox (event_id, run_id, event_type, payload_json, lane, created_at)
    SELECT inserted.run_id || ':run.created', inserted.run_id, 'run.created',
           jsonb_build_object('runId', inserted.run_id, 'orgId', inserted.org_id, 'playName', inserted.play_name),
           'ledger', __schema__.next_fact_time(inserted.run_id, 0)
    FROM inserted
)
SELECT inserted.run_id, inserted.created_at,
       EXISTS (SELECT 1 FROM admission WHERE NOT admission.accepting) AS release_closed
FROM item
LEFT JOIN inserted ON inserted.run_id = item.run_id
ORDER BY item.position;

-- name: runs_read_by_idempotency_key
-- FSH-5: the kept run of an org that holds an idempotency key, with the digest of the body that launched it (read after a launch found the key taken: a fresh snapshot sees the concurrent first insert).
-- plan: custom
-- (Planned for its values, the org test folds to one index condition of the unique index, null org or not.)
SELECT run.run_id, run.idempotency_digest
FROM __schema__.runs AS run
WHERE run.idempotency_key = %(idempotency_key)s::text
  AND (run.org_id = %(org_id)s::text OR (%(org_id)s::text IS NULL AND run.org_id IS NULL));
