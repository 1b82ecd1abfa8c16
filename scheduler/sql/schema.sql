-- name: schema_deploy_try_lock
-- Try the session-level advisory lock that serializes schema deploys of this schema.
SELECT pg_try_advisory_lock({{deploy_lock_key(%(schema)s::text)}}) AS locked;

-- name: schema_deploy_unlock
-- Release the schema deploy lock taken by schema_deploy_try_lock.
SELECT pg_advisory_unlock({{deploy_lock_key(%(schema)s::text)}}) AS unlocked;

-- name: schema_create
-- Create the scheduler schema if it is missing (run under the deploy lock).
CREATE SCHEMA IF NOT EXISTS __schema__;

-- name: schema_set_deploy_timeouts
-- Session timeouts for schema init and expansion (SCH-6: 60 s per statement).
SELECT set_config('statement_timeout', %(statement_timeout)s::text, false) AS statement_timeout;

-- name: schema_column_present
-- Whether a column exists on a scheduler table, read from the catalog (SCH-3: never cached).
-- plan: any
SELECT EXISTS (
    SELECT 1 FROM pg_attribute
    WHERE attrelid = to_regclass(%(table)s::text)
      AND attname = %(column)s::text
      AND NOT attisdropped
) AS present;

-- name: schema_shape_columns
-- Every column of every table in the scheduler schema, with type, nullability and default presence.
SELECT relation.relname AS table_name,
       attribute.attname AS column_name,
       format_type(attribute.atttypid, attribute.atttypmod) AS data_type,
       attribute.attnotnull AS not_null,
       attribute.atthasdef AND attribute.attgenerated = '' AS has_default,
       attribute.attgenerated <> '' AS generated
FROM pg_attribute AS attribute
JOIN pg_class AS relation ON relation.oid = attribute.attrelid
WHERE relation.relnamespace = to_regnamespace(%(schema)s::text)
  AND relation.relkind IN ('r', 'p')
  AND attribute.attnum > 0
  AND NOT attribute.attisdropped;

-- name: schema_shape_constraints
-- Constraint names per table in the scheduler schema.
SELECT relation.relname AS table_name, constraint_row.conname AS constraint_name, constraint_row.contype AS kind
FROM pg_constraint AS constraint_row
JOIN pg_class AS relation ON relation.oid = constraint_row.conrelid
WHERE relation.relnamespace = to_regnamespace(%(schema)s::text);

-- name: schema_shape_indexes
-- Index names in the scheduler schema with their validity (a failed CONCURRENTLY build is invalid).
SELECT index_relation.relname AS index_name, index_row.indisvalid AS valid
FROM pg_index AS index_row
JOIN pg_class AS index_relation ON index_relation.oid = index_row.indexrelid
WHERE index_relation.relnamespace = to_regnamespace(%(schema)s::text);

-- name: schema_shape_functions
-- Function signatures defined in the scheduler schema.
SELECT procedure.proname || '(' || pg_get_function_identity_arguments(procedure.oid) || ')' AS signature
FROM pg_proc AS procedure
WHERE procedure.pronamespace = to_regnamespace(%(schema)s::text);

-- name: schema_shape_triggers
-- Trigger names per table in the scheduler schema.
SELECT relation.relname AS table_name, trigger_row.tgname AS trigger_name
FROM pg_trigger AS trigger_row
JOIN pg_class AS relation ON relation.oid = trigger_row.tgrelid
WHERE relation.relnamespace = to_regnamespace(%(schema)s::text)
  AND NOT trigger_row.tgisinternal;

-- name: schema_pooled_role_defaults
-- What a transaction-pooled connection cannot send as startup options, as this role's defaults in this
-- database; each row is one ALTER ROLE, quoted by format() (%I, %L), for the caller to run.
SELECT format('ALTER ROLE CURRENT_USER IN DATABASE %I SET %s = %s', current_database(), setting.name,
              setting.value) AS statement
FROM (VALUES ('search_path', format('%I, public', %(schema)s::text)),
             ('statement_timeout', format('%L', %(statement_timeout)s::text)),
             ('plan_cache_mode', format('%L', %(plan_cache_mode)s::text))) AS setting (name, value);

-- name: schema_session_search_path
-- The first schema this session resolves unqualified names in (a pooled session gets it from its role).
SELECT (current_schemas(false))[1] AS first_schema, current_setting('search_path') AS search_path;

-- name: schema_tables
-- The tables that exist in the scheduler schema (what `flush` empties; APP-2: Django's introspection lists only the tables its search_path shows).
SELECT relation.relname AS table_name
FROM pg_catalog.pg_class AS relation
WHERE relation.relnamespace = to_regnamespace(%(schema)s::text) AND relation.relkind IN ('r', 'p');
