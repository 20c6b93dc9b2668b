-- backoff.upcoming_fires(names, count, now): the fires ahead of several
-- stored schedules in one call, as an operator's list of schedules and a
-- schedule's page show them (docs/adr/0072). Where each schedule's fires
-- start is decided here, so that every client shows the same: a running
-- schedule's at its next fire time or after p_now, whichever is later (a
-- slot before next_fire_at is never fired, and one due before p_now fires
-- at the next call of fire_schedules, not at a time shown as past); a
-- paused one's after p_now, the fires a resume now would bring. Each
-- schedule's times come from backoff.schedule_fires, the computation
-- fire_schedules advances with. Behind a router every shard answers for
-- the schedules it holds. No JIT, as for the other reads (docs/adr/0053).
-- Admin only: it names every schedule, as backoff.schedules does.
CREATE OR REPLACE FUNCTION backoff.upcoming_fires(
    p_names text[] DEFAULT NULL,
    p_count integer DEFAULT 10,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (name text, fire_at timestamptz, wall_time timestamp)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'upcoming fires: count must be between 1 and 1000, got "%"', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- schedule_fires returns the fires after its start: one microsecond
    -- before next_fire_at makes that slot the first.
    RETURN QUERY
    SELECT s.name, f.fire_at, f.wall_time
    FROM backoff.schedules AS s
    CROSS JOIN LATERAL backoff.schedule_fires(s.name,
        CASE WHEN s.paused THEN p_now
             ELSE greatest(p_now, s.next_fire_at - interval '1 microsecond') END,
        p_count) AS f
    WHERE p_names IS NULL OR s.name = ANY (p_names)
    ORDER BY s.name, f.fire_at;
END
$$;

COMMENT ON FUNCTION backoff.upcoming_fires(text[], integer, timestamptz) IS
'The next p_count (1 to 1000, default 10) fires of each stored schedule named in p_names (NULL: every schedule; a name no schedule has gives no rows), by name then time: name, fire_at and wall_time, the wall-clock time in the schedule''s zone. A running schedule''s fires start at its next fire time (next_fire_at) or after p_now, whichever is later: a slot due before p_now fires at the next call of backoff.fire_schedules, whose time is not known. A paused schedule''s start after p_now: the fires a resume at p_now would bring. A schedule whose expression has no later time has no rows. Times as backoff.schedule_fires computes them. Admin only.
Errors: 22023 for a count outside 1-1000 or a bad p_now.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-27 12:00+00'');
SELECT backoff.put_schedule(''hourly-sync'', ''sync'', p_every => ''1 hour'', p_now => ''2026-03-27 12:00+00'');
SELECT backoff.pause_schedule(''hourly-sync'', p_now => ''2026-03-27 12:00+00'');
SELECT * FROM backoff.upcoming_fires(p_count => 2, p_now => ''2026-03-27 12:20+00'');';
