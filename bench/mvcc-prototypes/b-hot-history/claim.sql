-- b.claim(queue, worker, limit, lease): the baseline's statement on b.hot.
-- The candidates come from a merge of the segments' claimable indexes, so
-- the claim order is exact across segments. The row is updated in place
-- (running, attempts + 1 = fencing token, lease): under an old snapshot
-- this leaves dead entries in the current segment's index as in the
-- baseline, but only until the segment is truncated.
CREATE FUNCTION b.claim(p_queue text, p_worker text, p_limit integer, p_lease interval,
                        p_now timestamptz DEFAULT now())
RETURNS TABLE (id bigint, attempts integer)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    UPDATE b.hot AS j
    SET status = 'running', attempts = j.attempts + 1, lease_until = p_now + p_lease, locked_by = p_worker
    WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM b.hot AS c
        WHERE c.queue = p_queue AND c.status IN ('pending', 'retrying') AND c.run_at <= p_now
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.attempts;
END
$$;
