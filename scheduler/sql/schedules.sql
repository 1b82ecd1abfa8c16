-- name: schedules_insert
-- SCD-1, SCD-7: a new schedule with its first slot (computed by the caller); a name its org already uses inserts nothing.
INSERT INTO __schema__.schedules (schedule_id, org_id, name, cron, timezone, launch_template, overlap, catch_up,
                                  paused, next_fire_at, created_at, updated_at)
VALUES (%(schedule_id)s::text, %(org_id)s::text, %(name)s::text, %(cron)s::text, %(timezone)s::text,
        %(launch_template)s::jsonb, %(overlap)s::text, %(catch_up)s::text, %(paused)s::boolean,
        %(next_fire_at)s::timestamptz, now(), now())
ON CONFLICT (org_id, name) DO NOTHING
RETURNING schedule_id, next_fire_at;

-- name: schedules_read
-- SCD-7: one schedule.
SELECT schedule.schedule_id, schedule.org_id, schedule.name, schedule.cron, schedule.timezone,
       schedule.launch_template, schedule.overlap, schedule.catch_up, schedule.paused, schedule.next_fire_at,
       schedule.created_at, schedule.updated_at
FROM __schema__.schedules AS schedule
WHERE schedule.schedule_id = %(schedule_id)s::text;

-- name: schedules_list
-- SCD-7: a page of the schedules of one org (or of every org), by org then name, after the (org, name) the last page ended on.
SELECT schedule.schedule_id, schedule.org_id, schedule.name, schedule.cron, schedule.timezone,
       schedule.launch_template, schedule.overlap, schedule.catch_up, schedule.paused, schedule.next_fire_at,
       schedule.created_at, schedule.updated_at
FROM __schema__.schedules AS schedule
WHERE (%(org_id)s::text IS NULL OR schedule.org_id = %(org_id)s::text)
  AND (%(after_org_id)s::text IS NULL OR (schedule.org_id, schedule.name) > (%(after_org_id)s::text, %(after_name)s::text))
ORDER BY schedule.org_id, schedule.name
LIMIT %(limit)s::integer;

-- name: schedules_set_paused
-- SCD-7: pause a schedule, or resume it from its next slot after now (the slots of the pause are not caught up).
UPDATE __schema__.schedules AS schedule
SET paused = %(paused)s::boolean,
    next_fire_at = coalesce(%(next_fire_at)s::timestamptz, schedule.next_fire_at),
    updated_at = now()
WHERE schedule.schedule_id = %(schedule_id)s::text AND schedule.paused IS DISTINCT FROM %(paused)s::boolean
RETURNING schedule.schedule_id;

-- name: schedules_lock_due
-- SCD-2: the unpaused schedule whose slot fell due first among those no other loop holds (SKIP LOCKED), locked for that slot's transaction.
SELECT schedule.schedule_id, schedule.org_id, schedule.cron, schedule.timezone, schedule.launch_template,
       schedule.overlap, schedule.catch_up, schedule.next_fire_at
FROM __schema__.schedules AS schedule
WHERE NOT schedule.paused AND schedule.next_fire_at <= coalesce(%(now)s::timestamptz, now())
ORDER BY schedule.next_fire_at
LIMIT 1
FOR NO KEY UPDATE SKIP LOCKED;

-- name: schedules_next_due
-- SCD-2: when the next unpaused slot falls due (one probe of the due index), so a loop sleeps until then.
SELECT min(schedule.next_fire_at) AS next_fire_at
FROM __schema__.schedules AS schedule
WHERE NOT schedule.paused;

-- name: schedule_fires_record
-- SCD-2: record what became of a schedule's slot and move the schedule to its next slot, in one statement run in the slot's transaction; a slot already recorded (a repair came first) keeps its row, and the schedule moves on all the same.
WITH fire AS (
    INSERT INTO __schema__.schedule_fires (schedule_id, slot_at, run_id, outcome, error, fired_at)
    VALUES (%(schedule_id)s::text, %(slot_at)s::timestamptz, %(run_id)s::text, %(outcome)s::text, %(error)s::text, now())
    ON CONFLICT (schedule_id, slot_at) DO NOTHING
    RETURNING schedule_id
), advanced AS (
    UPDATE __schema__.schedules AS schedule
    SET next_fire_at = %(next_fire_at)s::timestamptz, updated_at = now()
    WHERE schedule.schedule_id = %(schedule_id)s::text AND schedule.next_fire_at = %(slot_at)s::timestamptz
    RETURNING schedule.schedule_id
)
SELECT EXISTS (SELECT 1 FROM fire) AS recorded, EXISTS (SELECT 1 FROM advanced) AS advanced;

-- name: schedule_fires_read_previous_run
-- SCD-5: the run of the schedule's latest launched slot before this one, with its status.
SELECT fire.run_id, run.status
FROM __schema__.schedule_fires AS fire
JOIN __schema__.runs AS run ON run.run_id = fire.run_id
WHERE fire.schedule_id = %(schedule_id)s::text AND fire.outcome = 'launched' AND fire.slot_at < %(slot_at)s::timestamptz
ORDER BY fire.slot_at DESC
LIMIT 1;

-- name: schedule_fires_recent
-- SCD-7: a schedule's latest fires, newest first.
SELECT fire.slot_at, fire.outcome, fire.run_id, fire.error, fire.fired_at
FROM __schema__.schedule_fires AS fire
WHERE fire.schedule_id = %(schedule_id)s::text
ORDER BY fire.slot_at DESC
LIMIT %(limit)s::integer;

-- name: schedule_fires_lock_slot
-- SCD-6: a slot's fire row, locked for a repair (none: the slot was never reached or never recorded).
SELECT fire.outcome, fire.run_id
FROM __schema__.schedule_fires AS fire
WHERE fire.schedule_id = %(schedule_id)s::text AND fire.slot_at = %(slot_at)s::timestamptz
FOR UPDATE;

-- name: schedule_fires_repair
-- SCD-6: a repaired slot becomes launched with its run, unless it already launched.
INSERT INTO __schema__.schedule_fires (schedule_id, slot_at, run_id, outcome, error, fired_at)
VALUES (%(schedule_id)s::text, %(slot_at)s::timestamptz, %(run_id)s::text, 'launched', NULL, now())
ON CONFLICT (schedule_id, slot_at) DO UPDATE
SET run_id = excluded.run_id, outcome = 'launched', error = NULL, fired_at = now()
WHERE __schema__.schedule_fires.outcome <> 'launched'
RETURNING schedule_id;

-- name: schedules_update
-- SCD-7: change a schedule (each field given replaces it; the caller passes the slot after now when the cron or zone changed, else null to keep the next slot).
UPDATE __schema__.schedules AS schedule
SET name = coalesce(%(name)s::text, schedule.name),
    cron = coalesce(%(cron)s::text, schedule.cron),
    timezone = coalesce(%(timezone)s::text, schedule.timezone),
    launch_template = coalesce(%(launch_template)s::jsonb, schedule.launch_template),
    overlap = coalesce(%(overlap)s::text, schedule.overlap),
    catch_up = coalesce(%(catch_up)s::text, schedule.catch_up),
    paused = coalesce(%(paused)s::boolean, schedule.paused),
    next_fire_at = coalesce(%(next_fire_at)s::timestamptz, schedule.next_fire_at),
    updated_at = now()
WHERE schedule.schedule_id = %(schedule_id)s::text
RETURNING schedule.schedule_id;

-- name: schedules_delete
-- SCD-7: remove a schedule and its fires (the runs it launched stay).
WITH fires AS (
    DELETE FROM __schema__.schedule_fires AS fire WHERE fire.schedule_id = %(schedule_id)s::text
)
DELETE FROM __schema__.schedules AS schedule
WHERE schedule.schedule_id = %(schedule_id)s::text
RETURNING schedule.schedule_id;

-- name: schedule_metrics
-- SCD-7: for /metrics: unpaused schedules with a slot due now, the lag of the oldest due slot, and fires per outcome in the last hour.
SELECT (SELECT count(*) FROM __schema__.schedules AS due WHERE NOT due.paused AND due.next_fire_at <= now()) AS due,
       (SELECT coalesce(extract(epoch FROM now() - min(late.next_fire_at)), 0)
        FROM __schema__.schedules AS late WHERE NOT late.paused AND late.next_fire_at <= now()) AS oldest_due_seconds,
       (SELECT coalesce(jsonb_object_agg(counted.outcome, counted.fires), '{}'::jsonb)
        FROM (SELECT fire.outcome, count(*) AS fires FROM __schema__.schedule_fires AS fire
              WHERE fire.fired_at > now() - interval '1 hour' GROUP BY fire.outcome) AS counted) AS fires_last_hour;
