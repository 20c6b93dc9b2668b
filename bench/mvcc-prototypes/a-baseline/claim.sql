-- a.claim(queue, worker, limit, lease): backoff.claim's fast statement. The
-- candidates come from the head of jobs_claimable_idx, locked with
-- FOR UPDATE SKIP LOCKED, and the UPDATE finds them by primary key. Under an
-- old snapshot every claimed row leaves a dead entry at the head of that
-- index which vacuum may not remove, and each claim walks all of them.
CREATE FUNCTION a.claim(p_queue text, p_worker text, p_limit integer, p_lease interval,
                        p_now timestamptz DEFAULT now())
RETURNS TABLE (id bigint, attempts integer)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    UPDATE a.jobs AS j
    SET status = 'running', attempts = j.attempts + 1, lease_until = p_now + p_lease, locked_by = p_worker
    WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM a.jobs AS c
        WHERE c.queue = p_queue AND c.status IN ('pending', 'retrying') AND c.run_at <= p_now
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.attempts;
END
$$;
