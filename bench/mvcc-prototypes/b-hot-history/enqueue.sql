-- b.enqueue(queue, n): one INSERT into the current segment. The segment is
-- read in the statement (a three-row table), so a switch needs no
-- coordination: a statement that read the old segment just before the
-- switch inserts there, and b.maintain re-checks a segment under its
-- exclusive lock before truncating it.
CREATE FUNCTION b.enqueue(p_queue text, p_n integer, p_now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO b.hot (seg, queue, payload, priority, run_at, created_at)
    SELECT (SELECT s.seg FROM b.segments AS s WHERE s.state = 'current'), p_queue, '{}', 0, p_now, p_now
    FROM generate_series(1, p_n);
    RETURN p_n;
END
$$;
