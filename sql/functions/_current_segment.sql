-- backoff._current_segment(): the live segment of backoff.jobs that takes
-- new jobs now (docs/adr/0061), the one rule for "where does a live job
-- go": the DEFAULT of backoff.jobs.segment (an INSERT that names no
-- segment, as a user's own SQL, lands there), and as an InitPlan
-- `(SELECT backoff._current_segment())` read once per statement the
-- segment every enqueue names. The rule itself is the row of
-- backoff.segments marked current: claim, complete, complete_many, fail
-- and heartbeat, definer functions themselves, read that row into a parameter
-- directly, which costs them about 30,000 instructions less than this
-- call. Private; EXECUTE for backoff_admin too, whose own INSERTs evaluate
-- the default.
--
-- PL/pgSQL, not SQL: a SQL function that cannot be inlined (this one reads
-- a table, as its definer) is parsed and planned again at every call,
-- while PL/pgSQL keeps its plan for the session; about 50,000 instructions
-- less per call, paid by every enqueue and claim.
CREATE OR REPLACE FUNCTION backoff._current_segment()
RETURNS smallint
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN (SELECT s.segment FROM backoff.segments AS s WHERE s.current);
END
$$;
