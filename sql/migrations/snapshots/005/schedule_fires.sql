-- backoff.schedule_fires: the next p_count fire times of a schedule after
-- p_after, each with its wall-clock time in the schedule's zone: of a
-- stored schedule by name, or of an expression or interval not stored yet
-- (what `backoffctl` and the UI preview; docs/adr/0063). Both compute with
-- backoff._next_fire, the function fire_schedules advances with, so the
-- preview is what will fire (catch-up and pauses aside). The second form
-- takes at least four arguments and the first at most three, so that a
-- call with untyped parameters is never ambiguous. By name, a caller
-- scoped by backoff.grant_queue (or without any grant while grants are
-- required) reads only the schedules of the queues it may work on or
-- produce into, those fire_schedules fires for it: another queue's
-- schedule reads as none, its name and times are not told.
CREATE OR REPLACE FUNCTION backoff.schedule_fires(
    p_name  text,
    p_after timestamptz DEFAULT now(),
    p_count integer DEFAULT 10
)
RETURNS TABLE (fire_at timestamptz, wall_time timestamp)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s     backoff.schedules;
    v_scope text[];
BEGIN
    IF p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'count must be between 1 and 1000, got "%"', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The caller's queues, as fire_schedules scopes (NULL: unscoped).
    v_scope := backoff._queue_scope('work') || backoff._queue_scope('produce');
    SELECT * INTO v_s FROM backoff.schedules AS s
    WHERE s.name = p_name AND (v_scope IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_scope));
    IF NOT FOUND THEN
        RETURN;
    END IF;
    fire_at := coalesce(p_after, pg_catalog.now());
    FOR v_i IN 1..p_count LOOP
        fire_at := backoff._next_fire(v_s, fire_at);
        EXIT WHEN fire_at IS NULL;
        wall_time := fire_at AT TIME ZONE v_s.time_zone;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.schedule_fires(text, timestamptz, integer) IS
'The next p_count (1 to 1000, default 10) fire times after p_after (default now) of the stored schedule p_name, each with its wall-clock time in the schedule''s zone; no rows when no schedule has that name in this database, or when it belongs to a queue the caller may neither work on nor produce into (backoff.grant_queue; a caller without any grant while backoff.settings.require_queue_grants is on: every queue). Pauses and catch-up aside, these are the slots backoff.fire_schedules fires.
Errors: 22023 for a count outside 1-1000.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-27 12:00+00'');
SELECT * FROM backoff.schedule_fires(''nightly-report'', ''2026-03-27 12:00+00'', 3);';

CREATE OR REPLACE FUNCTION backoff.schedule_fires(
    p_cron      text,
    p_every     interval,
    p_time_zone text,
    p_anchor    timestamptz,
    p_after     timestamptz DEFAULT now(),
    p_count     integer DEFAULT 10
)
RETURNS TABLE (fire_at timestamptz, wall_time timestamp)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s backoff.schedules;
BEGIN
    IF p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'count must be between 1 and 1000, got "%"', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_s := backoff._schedule_timing(p_cron, p_every, p_time_zone, p_anchor);
    fire_at := coalesce(p_after, pg_catalog.now());
    FOR v_i IN 1..p_count LOOP
        fire_at := backoff._next_fire(v_s, fire_at);
        EXIT WHEN fire_at IS NULL;
        wall_time := fire_at AT TIME ZONE v_s.time_zone;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.schedule_fires(text, interval, text, timestamptz, timestamptz, integer) IS
'The next p_count (1 to 1000, default 10) fire times after p_after (default now) of a schedule that is not stored: exactly one of p_cron (read in p_time_zone) and p_every (from p_anchor; NULL: 1970-01-01 00:00 UTC), as backoff.put_schedule reads them; each with its wall-clock time in p_time_zone. The first four arguments are required (NULL where unused), so that this form is never confused with the one by name. Checks what put_schedule checks, with the same messages, so a configuration can be validated before it is applied.
Errors: 22023 for both or neither of p_cron and p_every, an invalid cron expression (the message names the expression, the field and its allowed range), an interval out of range or with months, a time zone that is not an IANA name, an anchor with a cron expression, a count outside 1-1000.
Example:
SELECT * FROM backoff.schedule_fires(''30 2 * * *'', NULL, ''Europe/Berlin'', NULL, ''2026-03-28 00:00+00'', 3);
SELECT * FROM backoff.schedule_fires(p_cron => NULL, p_every => ''6 hours'', p_time_zone => ''UTC'', p_anchor => ''2026-01-01 03:00+00'', p_after => ''2026-01-01 00:00+00'', p_count => 3);';
