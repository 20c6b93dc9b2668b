-- backoff.drop_schedule(name): delete a schedule. The jobs it enqueued
-- stay (they name it in backoff.jobs.schedule); a schedule put again under
-- the same name never fires a slot one of them already has. Returns true
-- when it existed here. Admin only.
CREATE OR REPLACE FUNCTION backoff.drop_schedule(p_name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM backoff.schedules AS s WHERE s.name = p_name;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.drop_schedule(text) IS
'Delete the schedule p_name; it fires no more. The jobs it enqueued stay, and keep its name and slot in backoff.jobs (schedule, schedule_slot), so a schedule put again under that name never enqueues a slot one of them has. Returns true when it existed in this database, false otherwise. Admin only.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'');
SELECT backoff.drop_schedule(''nightly-report'');';
