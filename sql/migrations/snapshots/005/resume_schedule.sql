-- backoff.resume_schedule(name, now): let a paused schedule fire again,
-- from its first slot after p_now: the slots that passed while it was
-- paused were switched off, not missed, so no catch-up fires them.
-- Returns true when it was paused, false when it was not or no schedule
-- has that name here. Admin only.
CREATE OR REPLACE FUNCTION backoff.resume_schedule(p_name text, p_now timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s backoff.schedules;
BEGIN
    p_now := backoff._now(p_now);
    SELECT * INTO v_s FROM backoff.schedules AS s WHERE s.name = p_name AND s.paused FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE backoff.schedules AS s
    SET paused = false, next_fire_at = backoff._next_fire(v_s, p_now), updated_at = p_now
    WHERE s.name = p_name;
    RETURN true;
END
$$;

COMMENT ON FUNCTION backoff.resume_schedule(text, timestamptz) IS
'Resume the paused schedule p_name: it fires next at its first slot after p_now; the slots that passed while it was paused are not caught up. Returns true when it was paused, false when it was not or no schedule has that name in this database. Admin only.
Errors: 22023 for a p_now outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-01 00:00+00'');
SELECT backoff.pause_schedule(''nightly-report'', ''2026-03-01 00:00+00'');
SELECT backoff.resume_schedule(''nightly-report'', ''2026-03-28 12:00+00'');
SELECT name, paused, next_fire_at FROM backoff.schedules;';
