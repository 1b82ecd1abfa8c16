-- name: provider_check_open
-- PRV-7: a check_provider run opens its control key before it starts the sandbox; only an open key records what its runner says.
INSERT INTO __schema__.control (key, value_json, created_at)
VALUES ('provider_check:' || %(check_id)s::text, '{}'::jsonb, clock_timestamp())
ON CONFLICT (key) DO NOTHING;

-- name: provider_check_record
-- PRV-7: what a check_provider runner said (its heartbeat, then its terminal), kept under its open check's key (the first of each kind); a runner whose check is over records nothing and is told so.
UPDATE __schema__.control AS kept
SET value_json = jsonb_build_object(%(said)s::text, %(body)s::jsonb || jsonb_build_object('at', clock_timestamp()))
                 || kept.value_json
WHERE kept.key = 'provider_check:' || %(check_id)s::text
RETURNING kept.key;

-- name: provider_check_read
-- PRV-7: what the check's runner has said so far (nothing: an empty object).
SELECT value_json FROM __schema__.control WHERE key = 'provider_check:' || %(check_id)s::text;

-- name: provider_check_forget
-- PRV-7: the check leaves nothing behind.
DELETE FROM __schema__.control WHERE key = 'provider_check:' || %(check_id)s::text;
