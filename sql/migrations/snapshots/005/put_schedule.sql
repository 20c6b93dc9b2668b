-- backoff.put_schedule(name, queue, cron | every, ...): create the periodic
-- job p_name or replace its settings (docs/adr/0063). The cron expression
-- is parsed here, once; fire_schedules reads the stored sets. A changed
-- timing (expression, interval, anchor or zone) restarts the schedule from
-- the first slot after p_now; otherwise its next fire time, its paused
-- switch and its counters are kept, so a configuration applied again
-- changes nothing. A schedule keeps its queue: the queue decides where
-- (on which shard) it lives and fires. Admin only.
CREATE OR REPLACE FUNCTION backoff.put_schedule(
    p_name            text,
    p_queue           text,
    p_cron            text DEFAULT NULL,
    p_every           interval DEFAULT NULL,
    p_time_zone       text DEFAULT 'UTC',
    p_payload         jsonb DEFAULT '{}',
    p_policy          text DEFAULT NULL,
    p_priority        integer DEFAULT 0,
    p_max_attempts    integer DEFAULT NULL,
    p_catch_up        text DEFAULT 'latest',
    p_catch_up_window interval DEFAULT NULL,
    p_catch_up_limit  integer DEFAULT 100,
    p_skip_if_running boolean DEFAULT false,
    p_anchor          timestamptz DEFAULT NULL,
    p_now             timestamptz DEFAULT now()
)
RETURNS backoff.schedules
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_t   backoff.schedules;
    v_old backoff.schedules;
    v_row backoff.schedules;
BEGIN
    p_now := backoff._now(p_now);
    p_name := backoff._check_name('schedule', p_name);
    p_queue := backoff._check_name('queue', p_queue);
    IF p_policy IS NOT NULL THEN
        p_policy := backoff._check_name('policy', p_policy);
        IF NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = p_policy) THEN
            RAISE EXCEPTION 'unknown policy "%"', p_policy
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- The job a slot enqueues must be one enqueue would take (docs/adr/0059).
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got "%"', p_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM backoff._check_payload(ARRAY[coalesce(p_payload, '{}')]);
    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catch_up IS NULL OR p_catch_up NOT IN ('latest', 'all') THEN
        RAISE EXCEPTION 'catch_up must be "latest" or "all", got "%"', coalesce(p_catch_up, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catch_up_window <= interval '0' OR p_catch_up_window > interval '876600 hours' THEN
        RAISE EXCEPTION 'catch_up_window must be NULL or more than 0 and at most 876600 hours, got "%"', p_catch_up_window
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catch_up_limit IS NULL OR p_catch_up_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'catch_up_limit must be between 1 and 10000, got "%"', coalesce(p_catch_up_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_t := backoff._schedule_timing(p_cron, p_every, p_time_zone, p_anchor);

    SELECT * INTO v_old FROM backoff.schedules AS s WHERE s.name = p_name FOR UPDATE;
    IF FOUND AND v_old.queue <> p_queue THEN
        RAISE EXCEPTION 'schedule "%" enqueues into queue "%", not "%": drop it and put it again to move it',
            p_name, v_old.queue, p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF FOUND AND v_old.cron IS NOT DISTINCT FROM v_t.cron AND v_old.every IS NOT DISTINCT FROM v_t.every
       AND v_old.anchor IS NOT DISTINCT FROM v_t.anchor AND v_old.time_zone = v_t.time_zone THEN
        v_t.next_fire_at := v_old.next_fire_at;
    ELSE
        v_t.next_fire_at := backoff._next_fire(v_t, p_now);
        IF v_t.next_fire_at IS NULL THEN
            RAISE EXCEPTION 'schedule "%": % never fires after "%"', p_name,
                coalesce('cron "' || p_cron || '"', 'interval "' || p_every || '"'), p_now
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    INSERT INTO backoff.schedules AS s (
        name, queue, payload, cron, every, anchor, time_zone,
        minutes, hours, days, months, weekdays, days_or, fixed_time,
        policy, priority, max_attempts, catch_up, catch_up_window, catch_up_limit, skip_if_running,
        next_fire_at, created_at, updated_at)
    VALUES (
        p_name, p_queue, coalesce(p_payload, '{}'), v_t.cron, v_t.every, v_t.anchor, v_t.time_zone,
        v_t.minutes, v_t.hours, v_t.days, v_t.months, v_t.weekdays, v_t.days_or, v_t.fixed_time,
        p_policy, coalesce(p_priority, 0), p_max_attempts, p_catch_up, p_catch_up_window, p_catch_up_limit,
        coalesce(p_skip_if_running, false),
        v_t.next_fire_at, p_now, p_now)
    ON CONFLICT (name) DO UPDATE SET
        payload = excluded.payload, cron = excluded.cron, every = excluded.every, anchor = excluded.anchor,
        time_zone = excluded.time_zone, minutes = excluded.minutes, hours = excluded.hours,
        days = excluded.days, months = excluded.months, weekdays = excluded.weekdays,
        days_or = excluded.days_or, fixed_time = excluded.fixed_time, policy = excluded.policy,
        priority = excluded.priority, max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
        catch_up_window = excluded.catch_up_window, catch_up_limit = excluded.catch_up_limit,
        skip_if_running = excluded.skip_if_running, next_fire_at = excluded.next_fire_at,
        updated_at = excluded.updated_at
    RETURNING * INTO v_row;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION backoff.put_schedule(text, text, text, interval, text, jsonb, text, integer, integer, text, interval, integer, boolean, timestamptz, timestamptz) IS
'Create the schedule p_name, or replace its settings, and return its row of backoff.schedules. Every slot enqueues one job into p_queue (backoff.fire_schedules) with p_payload, p_policy (NULL: the queue''s), p_priority and p_max_attempts (NULL: the policy''s). Timing, exactly one of: p_cron, a 5-field cron expression (minute hour day-of-month month day-of-week; each field *, */n, a, a-b, a-b/n or a comma list of these; names jan-dec and sun-sat; 7 is Sunday; @hourly, @daily, @weekly, @monthly, @yearly), read in p_time_zone (an IANA name, default UTC; daylight saving as cron: a fixed time skipped by the clock fires once at the end of the gap, one repeated fires once, the first time; a schedule with * in its minute or hour field fires by elapsed time, twice in a repeated hour, never in a gap); or p_every, a fixed interval (1 second to 876600 hours, no months) whose slots are p_anchor + k * p_every (p_anchor NULL: 1970-01-01 00:00 UTC). Missed slots (no caller fired them in time): p_catch_up ''latest'' (default) fires the latest one once and skips the others, ''all'' fires each one, oldest first, at most p_catch_up_limit (default 100) per call; p_catch_up_window (NULL: none) skips those older than now minus the window (''latest'' with a window of a minute fires nothing that is more than a minute late). p_skip_if_running: a slot whose schedule still has a pending, running or retrying job enqueues nothing (counted in skipped, last_skipped_slot). A new schedule, or one whose timing (expression, interval, anchor, zone) changed, fires first at its first slot after p_now; otherwise its next fire time, paused switch and counters are kept. A schedule''s queue cannot change (drop it and put it again). Admin only.
Errors: 22023 for a name, queue or policy that is not 1 to 128 bytes without control or format characters, an unknown policy, a priority outside -32768..32767, a payload larger than backoff.settings.max_payload_bytes, max_attempts < 1, both or neither of p_cron and p_every, a cron expression that is not 5 valid fields (the message names the expression, the field and its allowed range), one that never fires, an interval out of range or with months, a time zone that is not an IANA name, an anchor with a cron expression, a catch_up other than latest or all, a window not above 0, a limit outside 1-10000, another queue for an existing schedule, a p_now outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-28 12:00+00'');
SELECT backoff.put_schedule(''heartbeat'', ''pings'', p_every => ''5 minutes'', p_skip_if_running => true, p_now => ''2026-03-28 12:01+00'');
SELECT name, queue, cron, every, time_zone, next_fire_at FROM backoff.schedules ORDER BY name;';
