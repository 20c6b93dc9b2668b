-- backoff._current_segment(): the live segment of backoff.jobs that takes
-- new jobs now (docs/adr/0061), the one rule for "where does a live job
-- go" and "where does a claim look": the DEFAULT of backoff.jobs.segment
-- (an INSERT that names no segment, as a user's own SQL, lands there), the
-- segment every enqueue names, the one claim takes from and the one
-- complete, complete_many, fail, heartbeat and snooze look in. Private;
-- EXECUTE for backoff_admin too, whose own INSERTs evaluate the default.
--
-- A constant, published: backoff.segments records which segment is
-- current, and backoff._publish_current_segment writes that number into
-- this function's body, in the same transaction as the switch (backoff.rotate)
-- and at install. Being IMMUTABLE, the call is folded into a constant when a
-- statement is planned, so a cached plan names the current segment's
-- partition only: the other segments are pruned before it runs, and it
-- neither locks them nor starts their result relations and indexes, which
-- pruning at executor start still does (about 85,000 instructions a claim).
-- Replacing the function invalidates every cached plan that called it, in
-- every session, so the next execution plans again with the new number: a
-- statement planned before a switch commits uses the old segment, as a
-- statement that read backoff.segments before it would.
CREATE OR REPLACE FUNCTION backoff._publish_current_segment(p_segment smallint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_segment IS NULL OR p_segment < 1 THEN
        RAISE EXCEPTION 'current segment must be 1 or more, got "%"', coalesce(p_segment::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM backoff._publish_constant('_current_segment', 'smallint', pg_catalog.format('SELECT %s::smallint', p_segment));
END
$$;

SELECT backoff._publish_current_segment(s.segment) FROM backoff.segments AS s WHERE s.current;
