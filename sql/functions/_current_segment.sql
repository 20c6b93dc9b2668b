-- backoff._current_segment(): the live segment of backoff.jobs that takes
-- new jobs now (docs/adr/0061), the one rule for "where does a live job
-- go": the DEFAULT of backoff.jobs.segment (an INSERT that names no
-- segment, as a user's own SQL, lands there) and, as an InitPlan
-- `(SELECT backoff._current_segment())` read once per statement, the
-- segment every enqueue names and the only one a claim reads. Private;
-- EXECUTE for backoff_admin too, whose own INSERTs evaluate the default.
CREATE OR REPLACE FUNCTION backoff._current_segment()
RETURNS smallint
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.segment FROM backoff.segments AS s WHERE s.current
$$;
