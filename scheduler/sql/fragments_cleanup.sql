-- Fragments of the cleanup obligations (CLN-1), shared by settlement, dispatch, the sweep and adoption.

-- fragment: launch_environment(launch_json)
-- CLN-1, ADM-1: the environment a launch names; a launch that names none (or an empty one) is production's.
coalesce(nullif({launch_json} ->> 'environment', ''), 'production')

-- fragment: fresh_cleanup_state()
-- CLN-1: the state columns of a new cleanup obligation (pending, never tried, due now), for cleanup_obligations_insert.
'pending'::text AS status, 0 AS attempt_count, 0 AS failure_count, now() AS available_at, NULL::text AS last_error,
now() AS created_at, NULL::timestamptz AS blocked_at, NULL::text AS block_reason

-- fragment: cleanup_obligations_insert(source)
-- CLN-1: a sandbox's cleanup obligation, once per (provider, sandbox, routing domain). `source` is a relation of
-- provider, sandbox_id, run_id, attempt, environment, routing_domain and the state columns: fresh_cleanup_state()
-- for a new obligation, a legacy row's own when adoption copies it.
INSERT INTO __schema__.sandbox_cleanup_jobs_v2 (
    provider, sandbox_id, run_id, attempt, environment, routing_domain, status, attempt_count, failure_count,
    available_at, last_error, created_at, updated_at, blocked_at, block_reason
)
SELECT obligation.provider, obligation.sandbox_id, obligation.run_id, obligation.attempt, obligation.environment,
       obligation.routing_domain, obligation.status, obligation.attempt_count, obligation.failure_count,
       obligation.available_at, obligation.last_error, obligation.created_at, now(), obligation.blocked_at,
       obligation.block_reason
FROM {source} AS obligation
ON CONFLICT (provider, sandbox_id, routing_domain_key) DO NOTHING
RETURNING sandbox_id

-- fragment: ended_attempt_sandbox(verdict)
-- CLN-1: the sandbox an ending attempt parked (from the detached suspension parked on it), as a cleanup obligation's
-- source; `verdict` has run_id, attempt, suspension_json and launch_json. Settlement and suspension both end attempts.
SELECT {{suspension_provider({verdict}.suspension_json)}} AS provider,
       {verdict}.suspension_json -> 'runtimeSandboxRef' ->> 'sandboxId' AS sandbox_id,
       {verdict}.run_id, {verdict}.attempt, {{launch_environment({verdict}.launch_json)}} AS environment,
       nullif({verdict}.suspension_json -> 'runtimeSandboxRef' ->> 'routingDomain', '') AS routing_domain,
       {{fresh_cleanup_state()}}
FROM {verdict}
WHERE {{parked_on_attempt({verdict})}}
  AND nullif({verdict}.suspension_json -> 'runtimeSandboxRef' ->> 'sandboxId', '') IS NOT NULL

-- fragment: parked_on_attempt(verdict)
-- CLN-1: whether the run's detached suspension is parked on `verdict`'s attempt.
({verdict}.suspension_json ->> 'kind' = 'detached_runner'
 AND {verdict}.suspension_json -> 'runnerAttempt' = to_jsonb({verdict}.attempt))

-- fragment: unparked_runner_hint(verdict, reported)
-- CLN-1: a runner reported from a sandbox its attempt never parked (the dispatcher died between start and park): the
-- sweep finds that sandbox by its run/attempt tags and gives it its cleanup obligation.
INSERT INTO __schema__.control (key, value_json)
SELECT {{unreconciled_key({verdict}.run_id, {verdict}.attempt)}},
       jsonb_build_object('runId', {verdict}.run_id, 'attempt', {verdict}.attempt)
FROM {verdict}
WHERE {reported} AND NOT coalesce({{parked_on_attempt({verdict})}}, false)
ON CONFLICT (key) DO NOTHING

-- fragment: billing_job_available_at(resources)
-- BIL-1: when a new billing job is due. A run with a sandbox still billing (started, its delete not yet accepted) is
-- billed once its cleanup confirms, which makes the job due (sandbox_cleanup_complete's billing_nudge); looked at
-- before that, it would only be written back as waiting. Should the cleanup take longer, the job is due after the
-- recheck a waiting job gets (%(billing_recheck_seconds)s).
CASE WHEN EXISTS (
         SELECT 1 FROM jsonb_array_elements({resources}) AS billed(resource)
         WHERE jsonb_typeof(billed.resource -> 'billingStartedAt') = 'number'
           AND jsonb_typeof(billed.resource -> 'billingEndedAt') IS DISTINCT FROM 'number')
     THEN now() + make_interval(secs => %(billing_recheck_seconds)s::double precision)
     ELSE now() END
