-- name: schema_deploy_try_lock
-- Try the session-level advisory lock that serializes schema deploys of this schema.
SELECT pg_try_advisory_lock(hashtext('runtime_scheduler.deploy:' || %(schema)s::text)) AS locked;

-- name: schema_deploy_unlock
-- Release the schema deploy lock taken by schema_deploy_try_lock.
SELECT pg_advisory_unlock(hashtext('runtime_scheduler.deploy:' || %(schema)s::text)) AS unlocked;

-- name: schema_create
-- Create the scheduler schema if it is missing (run under the deploy lock).
CREATE SCHEMA IF NOT EXISTS __schema__;

-- name: schema_set_deploy_timeouts
-- Session timeouts for schema init and expansion (SCH-6: 60 s per statement).
SELECT set_config('statement_timeout', %(statement_timeout)s::text, false) AS statement_timeout;

-- name: schema_column_present
-- Whether a column exists on a scheduler table, read from the catalog (SCH-3: never cached).
SELECT EXISTS (
    SELECT 1 FROM pg_attribute
    WHERE attrelid = to_regclass(%(table)s::text)
      AND attname = %(column)s::text
      AND NOT attisdropped
) AS present;
