-- name: outbox_survey_lane
-- Before a listing (OBX-4): how many runs hold a pending terminal, and a pending wait (ledger lane), each counted only up to `bound` + 1 (an index range, no more), for admission_first only: the listing enumerates a class this small, and walks heads for a larger one; whether any fact of the lane could head a ready run at all (undelivered, not failed, due, under no live lease): when none could, the listing would find nothing and is not run, most looks of a lightly loaded drainer; and whether the outbox's statistics still describe it (statistics_fit), which lets the next survey and this look's listing run their generic forms (issue 47).
-- plan: custom
{{lane_survey()}};

-- name: outbox_survey_lane_generic
-- outbox_survey_lane planned once per connection: run when the drainer's last survey found the outbox's statistics fit (issue 47). Planning was most of the custom survey's cost; a backlog that arrived since costs this one survey a plan made for a smaller outbox (bounded counts and one EXISTS), and its answer sends the next looks back to custom plans.
-- plan: generic
{{lane_survey()}};

-- name: outbox_list_ready_runs
-- Runs whose lane head is ready (not failed, due, no live lease in its lane, its own drainer's included), minus excluded runs, in admission_first order (a run.created head, then a run with a pending terminal, then on the ledger lane one with a pending run.waiting, then the rest; each class by its heads' own age, then run id) or oldest_ready order (head age, then run id); reserves nothing (OBX-2..4, OBX-7). Each of the terminal and wait classes is small enough to list whole (outbox_survey_lane said so); outbox_list_ready_runs_walking serves a larger one.
-- plan: custom
-- (Run while the lane survey finds the outbox grown past its statistics. A generic plan costed for an empty
-- outbox took 105 s to list 16 runs of a 50,000-fact backlog that arrived before autovacuum's next analyze, its
-- outbox scans nested; planned per call, 1 ms. Planning is most of a call's cost (0.47 of 0.52 ms).
-- The generic form below made the drainer sooner at a just-launched run's lock, so the dispatcher's claim skipped
-- it (SKIP LOCKED) four to five times as often (65-104 claims an arm of about 1,000 runs at 37.3/s, against 15-20):
-- the queue stage's p99 read 9.1 ms against 6.2 until such a claim looked again after its cooldown (dispatch.py);
-- since, 7.8 against the release before issue 47's 7.0.)
{{ready_listing()}};

-- name: outbox_list_ready_runs_generic
-- outbox_list_ready_runs planned once per connection, run only when this look's lane survey found the outbox's statistics fit (every one of its relations at most twice the pages its statistics counted, plus 8): a generic plan made under them is costed within that factor of the outbox it reads, never for an empty one it outgrew (issue 47).
-- plan: generic
{{ready_listing()}};

-- name: outbox_list_ready_runs_walking
-- outbox_list_ready_runs when a terminal or wait class is too large to list whole: that class's candidates are the oldest ready heads whose run is in it, walked in head order until the limit is met (exact as well; cheap then, such heads being common); a small class is still listed whole (OBX-2..4, OBX-7).
-- plan: custom
WITH candidate_runs AS (
{{ready_listing_small_classes()}}
    UNION ALL
{{class_head_walk(%(walk_terminals)s::boolean, ('run.completed', 'run.failed', 'run.cancelled'))}}
    UNION ALL
{{class_head_walk(%(walk_waits)s::boolean, ('run.waiting'))}}
    UNION
{{ready_listing_heads()}}
)
{{ready_listing_order()}};

-- name: outbox_lock_runs
-- The claim's first statement: set the claim transaction's lock timeout and statement timeout, so a drainer never waits long behind a stuck lock (OBX-5, for this transaction only: pooler-safe), then lock up to `limit` of the candidate runs, in the given order, that no other drainer holds: FOR NO KEY UPDATE SKIP LOCKED (OBX-5); with each run's org and, on the ledger lane only, its dispatch launch (which names its receiver and carries its credentials: the search lane never reads them, OBX-2), read once here for all its facts.
-- plan: generic
SELECT run.run_id, run.org_id,
       CASE WHEN %(lane)s::text = 'ledger' THEN __schema__.run_ledger_dispatch_launch(run.launch_json) END
           AS dispatch_launch
FROM __schema__.runs AS run
-- An uncorrelated condition is a one-time filter: the timeouts are set before the scan, in this round trip.
WHERE (SELECT set_config('lock_timeout', %(lock_timeout)s::text, true) || set_config('statement_timeout',
                                                                                   %(statement_timeout)s::text, true))
      IS NOT NULL
  AND run.run_id = ANY (%(run_ids)s::text[])
ORDER BY array_position(%(run_ids)s::text[], run.run_id)
LIMIT %(limit)s::integer
FOR NO KEY UPDATE SKIP LOCKED;

-- name: outbox_lease_prefixes
-- Under the runs' locks (a fresh snapshot): for each run whose head is ready and whose lane nobody else holds, lease its causal prefix of at most max_facts undelivered facts (OBX-5).
-- plan: generic
WITH {{claimable_prefixes(%(run_ids)s::text[], %(lane)s::text)}},
leased AS (
    UPDATE __schema__.outbox AS fact
    SET lease_owner = %(lease_owner)s::text,
        lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::double precision)
    FROM ranked
    JOIN eligible_runs ON eligible_runs.run_id = ranked.run_id
    WHERE fact.event_id = ranked.event_id AND ranked.position <= %(max_facts)s::integer
    RETURNING fact.event_id, fact.run_id, fact.event_type, fact.payload_json, fact.created_at, fact.attempt_count
)
SELECT leased.event_id, leased.run_id, leased.event_type, leased.payload_json, leased.created_at, leased.attempt_count
FROM leased
ORDER BY leased.run_id, leased.created_at, leased.event_id;

-- name: outbox_lease_facts
-- Under the runs' locks, in the claim that read them: lease exactly the facts read (prefixes bound for a receiver outside this database), those still undelivered and held by nobody else, returned with their payloads in causal order (OBX-5).
-- plan: generic
WITH leased AS (
    UPDATE __schema__.outbox AS fact
    SET lease_owner = %(lease_owner)s::text,
        lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::double precision)
    WHERE fact.event_id = ANY (%(event_ids)s::text[])
      AND fact.delivered_at IS NULL
      AND (fact.lease_owner IS NULL OR fact.lease_owner = %(lease_owner)s::text OR fact.lease_expires_at <= now())
    RETURNING fact.event_id, fact.run_id, fact.event_type, fact.payload_json, fact.created_at, fact.attempt_count
)
SELECT leased.event_id, leased.run_id, leased.event_type, leased.payload_json, leased.created_at, leased.attempt_count
FROM leased
ORDER BY leased.run_id, leased.created_at, leased.event_id;

-- name: outbox_read_prefixes
-- Under the runs' locks: the same causal prefixes outbox_lease_prefixes would lease, read without leasing, for a delivery that acknowledges them in this transaction (OBX-5, OBX-10); payloads only of terminal facts, the ones the delivery may rewrite (TRM-6).
-- plan: generic
WITH {{claimable_prefixes(%(run_ids)s::text[], %(lane)s::text)}}
SELECT ranked.event_id, ranked.run_id, ranked.event_type,
       CASE WHEN ranked.event_type = ANY (%(terminal_types)s::text[]) THEN ranked.payload_json END AS payload_json,
       ranked.created_at, ranked.attempt_count
FROM ranked
JOIN eligible_runs ON eligible_runs.run_id = ranked.run_id
WHERE ranked.position <= %(max_facts)s::integer
ORDER BY ranked.run_id, ranked.created_at, ranked.event_id;

-- name: outbox_ack
-- Acknowledge delivered prefixes (a claim's, together): delivered, lease cleared; only rows this drainer still holds (OBX-6).
-- plan: generic
{{acknowledge_facts(%(event_ids)s::text[], %(lease_owner)s::text)}};

-- name: run_ledger_store_and_ack
-- The built-in receiver's one store (OBX-10): store ledger events idempotently by event id, from the outbox (facts by event id, a payload the delivery rewrote, TRM-6, given by event id) and from posted events, and acknowledge those facts in the same statement; inside a claim they were read, not leased, so a fact another drainer holds a live lease on is left alone.
-- plan: generic
WITH incoming AS (
    SELECT fact.event_id, fact.run_id, fact.event_type, fact.created_at AS occurred_at,
           coalesce(%(payloads)s::jsonb -> fact.event_id, fact.payload_json, '{}'::jsonb) AS payload
    FROM __schema__.outbox AS fact
    WHERE fact.event_id = ANY (%(event_ids)s::text[]) AND fact.delivered_at IS NULL
    UNION ALL
    SELECT event.event_id, event.run_id, event.event_type, event.occurred_at, event.payload
    FROM jsonb_to_recordset(%(events)s::jsonb)
         AS event(event_id text, run_id text, event_type text, occurred_at timestamptz, payload jsonb)
), stored AS (
    {{store_ledger_events(incoming)}}
), acked AS (
    {{acknowledge_unleased_facts(%(event_ids)s::text[], %(lease_owner)s::text)}}
)
SELECT (SELECT count(*) FROM stored) AS stored,
       (SELECT coalesce(array_agg(acked.event_id), '{}'::text[]) FROM acked) AS acked_event_ids;

-- name: outbox_ack_search
-- The search lane's one acknowledgement (OBX-2): facts read under their run locks inside a claim, or leased by this drainer; a fact another drainer holds a live lease on is left alone.
{{acknowledge_unleased_facts(%(event_ids)s::text[], %(lease_owner)s::text)}};

-- name: outbox_fail_prefix
-- A failed delivery: the head counts an attempt, backs off or is marked failed past the maximum; the whole prefix's lease is returned (OBX-6).
WITH failed_head AS (
    UPDATE __schema__.outbox AS fact
    SET attempt_count = fact.attempt_count + 1,
        last_error = %(error)s::text,
        next_attempt_at = now() + %(backoff_ms)s::double precision * interval '1 millisecond',
        failed_at = CASE WHEN fact.attempt_count + 1 >= %(max_attempts)s::integer THEN now() END,
        lease_owner = NULL,
        lease_expires_at = NULL
    WHERE fact.event_id = %(head_event_id)s::text
      AND fact.lease_owner = %(lease_owner)s::text
      AND fact.delivered_at IS NULL
    RETURNING fact.failed_at IS NOT NULL AS failed
), released AS (
    UPDATE __schema__.outbox AS fact
    SET lease_owner = NULL, lease_expires_at = NULL
    WHERE fact.event_id = ANY (%(event_ids)s::text[])
      AND fact.event_id <> %(head_event_id)s::text
      AND fact.lease_owner = %(lease_owner)s::text
      AND fact.delivered_at IS NULL
)
SELECT coalesce((SELECT failed FROM failed_head), false) AS failed, EXISTS (SELECT 1 FROM failed_head) AS counted;

-- name: outbox_release_leases
-- Return every lease this drainer holds (SIGTERM): the facts become claimable at once (OBX-9).
UPDATE __schema__.outbox AS fact
SET lease_owner = NULL, lease_expires_at = NULL
WHERE fact.lease_owner = %(lease_owner)s::text AND fact.delivered_at IS NULL
RETURNING fact.event_id;

-- name: outbox_requeue_failed_head
-- Operator repair: a failed head becomes deliverable again, unblocking its run's lane (OBX-2).
UPDATE __schema__.outbox AS fact
SET failed_at = NULL, next_attempt_at = NULL, attempt_count = 0, last_error = NULL
WHERE fact.event_id = %(event_id)s::text AND fact.failed_at IS NOT NULL AND fact.delivered_at IS NULL
RETURNING fact.event_id;

-- name: runs_read_array_input_intents
-- The runs' array-input intent, read under the claim's run locks; only after the catalog shows the column (SCH-3).
-- plan: generic
SELECT run.run_id, run.array_input_started FROM __schema__.runs AS run WHERE run.run_id = ANY (%(run_ids)s::text[]);

-- name: outbox_release_facts
-- Return the lease of some leased facts without counting an attempt (a prefix cut before a terminal on another receiver, OBX-8).
UPDATE __schema__.outbox AS fact
SET lease_owner = NULL, lease_expires_at = NULL
WHERE fact.event_id = ANY (%(event_ids)s::text[]) AND fact.lease_owner = %(lease_owner)s::text AND fact.delivered_at IS NULL
RETURNING fact.event_id;

-- name: run_ledger_count_events
-- How many of a run's facts the built-in receiver holds, and how many are still undelivered (the demo prints it).
SELECT (SELECT count(*) FROM __schema__.run_ledger_events WHERE run_id = %(run_id)s::text) AS received,
       (SELECT count(*) FROM __schema__.outbox WHERE run_id = %(run_id)s::text AND delivered_at IS NULL) AS undelivered;

-- name: scheduler_metrics
-- Gauges for /metrics: the outbox's undelivered facts, failed heads, retries in flight and oldest undelivered age; open runs by status.
SELECT (SELECT count(*) FROM __schema__.outbox WHERE delivered_at IS NULL) AS outbox_undelivered,
       (SELECT count(*) FROM __schema__.outbox WHERE delivered_at IS NULL AND failed_at IS NOT NULL) AS outbox_failed_heads,
       (SELECT count(*) FROM __schema__.outbox WHERE delivered_at IS NULL AND attempt_count > 0 AND failed_at IS NULL) AS outbox_retrying,
       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::double precision
        FROM __schema__.outbox WHERE delivered_at IS NULL) AS outbox_oldest_undelivered_seconds,
       (SELECT count(*) FROM __schema__.runs WHERE status = 'queued') AS runs_queued,
       (SELECT count(*) FROM __schema__.runs AS run WHERE {{holds_slot(run)}}) AS runs_active,
       (SELECT count(*) FROM __schema__.sandbox_cleanup_jobs_v2 WHERE status = 'pending') AS cleanup_pending,
       (SELECT count(*) FROM __schema__.sandbox_cleanup_jobs_v2 WHERE status = 'blocked') AS cleanup_blocked,
       (SELECT count(*) FROM __schema__.compute_billing_jobs_v2 WHERE status = 'pending') AS billing_pending;

-- name: outbox_extend_leases
-- Keep a drainer's live leases alive while its deliveries are in flight, so a slow receiver never outlasts a lease (OBX-6); an expired lease is never revived.
UPDATE __schema__.outbox AS fact
SET lease_expires_at = clock_timestamp() + make_interval(secs => %(lease_seconds)s::double precision)
WHERE fact.event_id = ANY (%(event_ids)s::text[])
  AND fact.lease_owner = %(lease_owner)s::text
  AND fact.delivered_at IS NULL
  AND fact.lease_expires_at > clock_timestamp()
RETURNING fact.event_id;

-- name: wake_signals_arm
-- A listener going idle asks for a NOTIFY on its channel's next event (the wake triggers disarm it as they notify).
-- plan: any
-- (A dispatcher arms between generic claims, a drainer between its listings (custom or generic): a mode switch each
-- way cost more.)
INSERT INTO __schema__.wake_signals AS wake (channel, armed, armed_at)
VALUES (%(channel)s::text, true, now())
ON CONFLICT (channel) DO UPDATE SET armed = true, armed_at = now()
WHERE NOT wake.armed;

-- name: outbox_may_analyze
-- Whether this role may ANALYZE the outbox (its owner, or on PostgreSQL 17 and newer, MAINTAIN on it): a drainer that may not leaves the outbox's statistics to autovacuum (issue 47).
-- plan: any
-- (The version is asked first: before PostgreSQL 17 there is no MAINTAIN privilege, and asking about it is an error.)
SELECT coalesce((SELECT pg_catalog.pg_has_role(rel.relowner, 'USAGE')
                        OR CASE WHEN pg_catalog.current_setting('server_version_num')::integer >= 170000
                                THEN pg_catalog.has_table_privilege(rel.oid, 'MAINTAIN') ELSE false END
                 FROM pg_catalog.pg_class AS rel
                 WHERE rel.oid = pg_catalog.to_regclass('__schema__.outbox')), false) AS may_analyze;

-- name: outbox_analyze
-- Refresh the outbox's statistics when a drainer's lane survey found the outbox grown past them (OBX-4, issue 47): the survey and listing go back to their generic plans at the next look instead of being planned on every call until autovacuum's next analyze. SKIP_LOCKED: when autovacuum or another drainer is analyzing it already, this one does nothing and waits for nothing.
-- plan: any
ANALYZE (SKIP_LOCKED) __schema__.outbox;
