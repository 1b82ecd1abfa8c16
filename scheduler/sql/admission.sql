-- name: release_admission_lock
-- Take the transaction-scoped advisory locks of every admission key, in one fixed (sorted) order (ADM-4, ADM-5).
SELECT {{release_locks(%(keys)s::text[])}} AS locked;

-- name: release_admission_read
-- Read a release's admission: the highest epoch among its write keys wins, and on a tie closed wins (ADM-3).
SELECT admission.accepting, admission.admission_epoch
FROM __schema__.runtime_release_admission AS admission
WHERE admission.release_id = ANY (%(keys)s::text[])
ORDER BY admission.admission_epoch DESC, admission.accepting ASC
LIMIT 1;

-- name: release_admission_set
-- Lock every key in sorted order, then write each key where the new epoch is at least the stored one (ADM-4).
WITH admission_lock AS MATERIALIZED (
    SELECT {{release_locks(%(keys)s::text[])}} AS locked
)
INSERT INTO __schema__.runtime_release_admission AS admission (release_id, accepting, admission_epoch, updated_at)
SELECT key, %(accepting)s::boolean, %(admission_epoch)s::bigint, now()
FROM unnest(%(keys)s::text[]) AS key
CROSS JOIN admission_lock
ON CONFLICT (release_id) DO UPDATE
    SET accepting = excluded.accepting,
        admission_epoch = excluded.admission_epoch,
        updated_at = now()
    WHERE excluded.admission_epoch >= admission.admission_epoch
RETURNING admission.release_id, admission.accepting, admission.admission_epoch;
