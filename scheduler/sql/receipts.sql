-- Work receipts (RCP-1): a run's steps, memoized. Every statement takes a batch of keys (a single call is a batch
-- of one, so the two forms cannot drift), is fenced on the caller's run being open and its attempt being current
-- (receipt_fence), and answers one row per key in input order (receipt_answer). RCP-2's `sys:` guard runs in
-- Python before any of these is sent. Each runs its generic plan (`-- plan: generic`): PostgreSQL's automatic
-- choice re-plans these array statements on every call, which costs as much as running them.

-- name: receipts_claim
-- RCP-1: claim each key for the caller's attempt: a missing or claimable receipt becomes running with a new lease (claimed); a completed one answers with its output, a skipped or failed one with its status, a live lease of another holder with held; nothing else changes.
-- plan: generic
WITH {{receipt_fence()}},
item AS (
    SELECT item.key, item.position
    FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS item(key, position)
), written AS (
    {{receipt_upsert(
        (SELECT fence.run_id, item.key, 'running', gen_random_uuid()::text,
                clock_timestamp() + make_interval(secs => %(lease_ms)s::integer / 1000.0),
                %(attempt)s::integer, NULL::jsonb, NULL::jsonb
         FROM fence CROSS JOIN item ORDER BY item.key),
        (status, lease_id, lease_expires_at, run_attempt, updated_at),
        ('running', EXCLUDED.lease_id, EXCLUDED.lease_expires_at, EXCLUDED.run_attempt, now())
    )}}
)
{{receipt_answer(written, true)}};

-- name: receipts_complete
-- RCP-1: complete each key with its output, first write wins: with a lease id only while that lease still holds; without one (the completed-receipt cache insert) only where a claim could take the key; a completed receipt's output is never replaced.
-- plan: generic
WITH {{receipt_fence()}},
item AS (
    SELECT item.key, item.lease_id, item.output, item.position
    FROM unnest(%(keys)s::text[], %(lease_ids)s::text[], %(outputs)s::jsonb[])
         WITH ORDINALITY AS item(key, lease_id, output, position)
), held AS (
    {{receipt_held(
        (status, output_json, error_json, lease_id, lease_expires_at, updated_at),
        ('completed', {{receipt_item(outputs, jsonb)}}, NULL, NULL, NULL, now())
    )}}
), cached AS (
    {{receipt_upsert(
        (SELECT fence.run_id, item.key, 'completed', NULL, NULL, %(attempt)s::integer, item.output, NULL::jsonb
         FROM fence CROSS JOIN item WHERE item.lease_id IS NULL ORDER BY item.key),
        (status, output_json, error_json, lease_id, lease_expires_at, run_attempt, updated_at),
        ('completed', EXCLUDED.output_json, NULL, NULL, NULL, EXCLUDED.run_attempt, now())
    )}}
), written AS (
    SELECT * FROM held UNION ALL SELECT * FROM cached
)
{{receipt_answer(written, %(return_output)s::boolean)}};

-- name: receipts_fail
-- RCP-1: fail each key the caller's lease still holds, keeping its error (with `final`): a later attempt may claim it again unless it is final.
-- plan: generic
WITH {{receipt_fence()}},
item AS (
    SELECT item.key, item.lease_id, item.error, item.position
    FROM unnest(%(keys)s::text[], %(lease_ids)s::text[], %(errors)s::jsonb[])
         WITH ORDINALITY AS item(key, lease_id, error, position)
), written AS (
    {{receipt_held(
        (status, error_json, lease_id, lease_expires_at, updated_at),
        ('failed', {{receipt_item(errors, jsonb)}}, NULL, NULL, now())
    )}}
)
{{receipt_answer(written, false)}};

-- name: receipts_release
-- RCP-1: give back each lease the caller still holds: the receipt is queued again, with no lease.
-- plan: generic
WITH {{receipt_fence()}},
{{receipt_leased_items()}}, written AS (
    {{receipt_held(
        (status, lease_id, lease_expires_at, updated_at),
        ('queued', NULL, NULL, now())
    )}}
)
{{receipt_answer(written, false)}};

-- name: receipts_skip
-- RCP-1: mark each key skipped (later claims skip the step): with a lease id while that lease holds, without one where a claim could take the key.
-- plan: generic
WITH {{receipt_fence()}},
{{receipt_leased_items()}}, held AS (
    {{receipt_held(
        (status, lease_id, lease_expires_at, updated_at),
        ('skipped', NULL, NULL, now())
    )}}
), unheld AS (
    {{receipt_upsert(
        (SELECT fence.run_id, item.key, 'skipped', NULL, NULL, %(attempt)s::integer, NULL::jsonb, NULL::jsonb
         FROM fence CROSS JOIN item WHERE item.lease_id IS NULL ORDER BY item.key),
        (status, lease_id, lease_expires_at, run_attempt, updated_at),
        ('skipped', NULL, NULL, EXCLUDED.run_attempt, now())
    )}}
), written AS (
    SELECT * FROM held UNION ALL SELECT * FROM unheld
)
{{receipt_answer(written, false)}};

-- name: receipts_mark_queued
-- RCP-1: declare or reset steps: a missing key is inserted queued, a claimable one (expired, older attempt, non-final failure) queued again; completed, skipped and live-held receipts are left as they are.
-- plan: generic
WITH {{receipt_fence()}},
item AS (
    SELECT item.key, item.position
    FROM unnest(%(keys)s::text[]) WITH ORDINALITY AS item(key, position)
), written AS (
    {{receipt_upsert(
        (SELECT fence.run_id, item.key, 'queued', NULL, NULL, %(attempt)s::integer, NULL::jsonb, NULL::jsonb
         FROM fence CROSS JOIN item ORDER BY item.key),
        (status, lease_id, lease_expires_at, run_attempt, updated_at),
        ('queued', NULL, NULL, EXCLUDED.run_attempt, now())
    )}}
)
{{receipt_answer(written, false)}};

-- name: receipts_heartbeat
-- RCP-1: extend each lease the caller still holds by lease_ms; a key whose lease was lost answers unchanged.
-- plan: generic
WITH {{receipt_fence()}},
{{receipt_leased_items()}}, written AS (
    {{receipt_held(
        (lease_expires_at, updated_at),
        (clock_timestamp() + make_interval(secs => %(lease_ms)s::integer / 1000.0), now())
    )}}
)
{{receipt_answer(written, false)}};

-- name: receipts_list_for_run
-- RCP-1: a run's receipts in the order their steps were first recorded (a read: `sys:` keys included).
SELECT receipt.key, receipt.status, receipt.run_attempt, receipt.lease_expires_at, receipt.output_json AS output,
       receipt.error_json AS error, receipt.created_at, receipt.updated_at
FROM __schema__.receipts AS receipt
WHERE receipt.run_id = %(run_id)s::text
ORDER BY receipt.created_at, receipt.key;
