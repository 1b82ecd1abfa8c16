-- name: org_limits_read
-- FSH-10: one org's limits (an org without a row reads as the defaults: no cap of its own, no start rate, not paused) with its active and queued runs.
SELECT %(org_id)s::text AS org_id, limits.max_active, limits.max_starts_per_minute,
       coalesce(limits.paused, false) AS paused, coalesce(limits.weight, 1) AS weight, limits.reason, limits.updated_at, limits.updated_by,
       {{org_active_runs(%(org_id)s::text)}} AS active,
       (SELECT count(*) FROM __schema__.runs AS queued
        WHERE coalesce(queued.org_id, '') = %(org_id)s::text AND queued.status = 'queued') AS queued
FROM (SELECT 1) AS one
LEFT JOIN __schema__.org_limits AS limits ON limits.org_id = %(org_id)s::text;

-- name: org_limits_set
-- FSH-8, FSH-10, FSH-11: change an org's limits and weight (a field marked set takes its value, null clearing it; the others keep theirs) and record the change in operator_actions, in one statement; the next claim reads it.
WITH before AS MATERIALIZED (
    SELECT limits.max_active, limits.max_starts_per_minute, limits.paused, limits.weight
    FROM __schema__.org_limits AS limits
    WHERE limits.org_id = %(org_id)s::text
), written AS (
    INSERT INTO __schema__.org_limits AS limits
        (org_id, max_active, max_starts_per_minute, paused, weight, reason, updated_at, updated_by)
    VALUES (%(org_id)s::text, %(max_active)s::integer, %(max_starts_per_minute)s::integer,
            coalesce(%(paused)s::boolean, false), coalesce(%(weight)s::integer, 1), %(reason)s::text, now(),
            %(actor)s::text)
    ON CONFLICT (org_id) DO UPDATE SET
        max_active = CASE WHEN %(set_max_active)s::boolean THEN excluded.max_active ELSE limits.max_active END,
        max_starts_per_minute = CASE WHEN %(set_max_starts)s::boolean THEN excluded.max_starts_per_minute
                                     ELSE limits.max_starts_per_minute END,
        paused = coalesce(%(paused)s::boolean, limits.paused),
        weight = coalesce(%(weight)s::integer, limits.weight),
        reason = CASE WHEN %(set_reason)s::boolean THEN excluded.reason ELSE limits.reason END,
        updated_at = now(), updated_by = excluded.updated_by
    RETURNING limits.org_id, limits.max_active, limits.max_starts_per_minute, limits.paused, limits.weight,
              limits.reason
), audited AS (
    INSERT INTO __schema__.operator_actions (actor, action, target, reason, outcome, changed, created_at)
    SELECT %(actor)s::text, %(action)s::text, 'org:' || written.org_id, written.reason,
           'maxActive=' || coalesce(written.max_active::text, 'default')
           || ' maxStartsPerMinute=' || coalesce(written.max_starts_per_minute::text, 'none')
           || ' paused=' || written.paused::text || ' weight=' || written.weight::text,
           NOT EXISTS (SELECT 1 FROM before
                       WHERE before.max_active IS NOT DISTINCT FROM written.max_active
                         AND before.max_starts_per_minute IS NOT DISTINCT FROM written.max_starts_per_minute
                         AND before.paused = written.paused AND before.weight = written.weight),
           now()
    FROM written
    RETURNING changed
)
SELECT (SELECT changed FROM audited) AS changed;

-- name: org_limits_list_held
-- FSH-10: the orgs an operator should look at: paused orgs and orgs with runs waiting at a cap or start rate, with their active and queued runs (the dashboard's list).
SELECT limits.org_id, limits.paused, limits.max_active, limits.max_starts_per_minute, limits.weight, limits.reason,
       {{org_active_runs(limits.org_id)}} AS active,
       (SELECT count(*) FROM __schema__.runs AS queued
        WHERE coalesce(queued.org_id, '') = limits.org_id AND queued.status = 'queued') AS queued
FROM __schema__.org_limits AS limits
WHERE limits.paused OR limits.max_active IS NOT NULL OR limits.max_starts_per_minute IS NOT NULL
ORDER BY limits.paused DESC, limits.org_id
LIMIT %(limit)s::integer;

-- name: org_metrics
-- FSH-10: active and queued runs per org for /metrics: the %(top)s orgs holding the most by name, the rest summed as "other", so the label set stays bounded; runs without an org are "(none)".
WITH per_org AS (
    SELECT coalesce(run.org_id, '') AS org_key,
           count(*) FILTER (WHERE {{holds_slot(run)}}) AS active,
           count(*) FILTER (WHERE run.status = 'queued') AS queued
    FROM __schema__.runs AS run
    WHERE run.status IN ('queued', 'running', 'waiting')
    GROUP BY coalesce(run.org_id, '')
), ranked AS (
    SELECT per_org.org_key, per_org.active, per_org.queued,
           row_number() OVER (ORDER BY per_org.active + per_org.queued DESC, per_org.org_key) AS place
    FROM per_org
)
SELECT CASE WHEN ranked.place > %(top)s::integer THEN 'other'
            ELSE coalesce(nullif(ranked.org_key, ''), '(none)') END AS org,
       sum(ranked.active)::bigint AS active, sum(ranked.queued)::bigint AS queued
FROM ranked
GROUP BY 1
ORDER BY 1;
