-- backoff.pause_schedule(name): stop a schedule from firing until
-- backoff.resume_schedule. Returns true when it was running, false when it
-- was already paused or no schedule has that name here (behind a router,
-- every shard is asked and only the one that holds it answers true).
-- Admin only.
CREATE OR REPLACE FUNCTION backoff.pause_schedule(p_name text, p_now timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_now := backoff._now(p_now);
    UPDATE backoff.schedules AS s SET paused = true, updated_at = p_now
    WHERE s.name = p_name AND NOT s.paused;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.pause_schedule(text, timestamptz) IS
'Pause the schedule p_name: backoff.fire_schedules fires nothing of it until backoff.resume_schedule, which starts again from the first slot after its own time (the slots in between are not missed, they are skipped). Jobs it already enqueued are not touched. Returns true when the schedule was running, false when it was already paused or no schedule has that name in this database. Admin only.
Errors: 22023 for a p_now outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'');
SELECT backoff.pause_schedule(''nightly-report'');';
