-- b.complete_many(ids, attempts): move the finished jobs to b.history in
-- one statement (DELETE ... RETURNING feeding an INSERT), fenced on
-- (id, attempts) as backoff.complete_many is.
--
-- A job b.maintain moves between segments while this statement waits for
-- its row lock is gone from the row this statement found (the move is a
-- DELETE and an INSERT), so the statement skips it. When fewer rows than
-- asked were completed, the same statement runs once more: it has a new
-- snapshot (READ COMMITTED), sees the moved row in its new segment, and
-- rows it already moved are no longer in b.hot. A fencing failure costs
-- that second statement too.
CREATE FUNCTION b.complete_many(p_ids bigint[], p_attempts integer[], p_now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off
AS $$
DECLARE
    v_n    integer;
    v_more integer;
BEGIN
    WITH done AS (
        DELETE FROM b.hot AS h
        USING unnest(p_ids, p_attempts) AS t(id, attempt)
        WHERE h.id = ANY (p_ids) AND h.id = t.id AND h.attempts = t.attempt AND h.status = 'running'
        RETURNING h.*
    )
    INSERT INTO b.history (id, queue, payload, status, priority, attempts, run_at, locked_by, created_at, completed_at)
    SELECT d.id, d.queue, d.payload, 'completed', d.priority, d.attempts, d.run_at, d.locked_by, d.created_at, p_now
    FROM done AS d;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n < cardinality(p_ids) THEN
        WITH done AS (
            DELETE FROM b.hot AS h
            USING unnest(p_ids, p_attempts) AS t(id, attempt)
            WHERE h.id = ANY (p_ids) AND h.id = t.id AND h.attempts = t.attempt AND h.status = 'running'
            RETURNING h.*
        )
        INSERT INTO b.history (id, queue, payload, status, priority, attempts, run_at, locked_by, created_at, completed_at)
        SELECT d.id, d.queue, d.payload, 'completed', d.priority, d.attempts, d.run_at, d.locked_by, d.created_at, p_now
        FROM done AS d;
        GET DIAGNOSTICS v_more = ROW_COUNT;
        v_n := v_n + v_more;
    END IF;
    RETURN v_n;
END
$$;
