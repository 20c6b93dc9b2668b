-- c.claim(queue, worker, limit, lease): delete the head of c.ready (locked
-- with FOR UPDATE SKIP LOCKED) and mark those jobs running in c.jobs, one
-- statement. A retry (not in this load) would insert the ready row again.
CREATE FUNCTION c.claim(p_queue text, p_worker text, p_limit integer, p_lease interval,
                        p_now timestamptz DEFAULT now())
RETURNS TABLE (id bigint, attempts integer)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    WITH r AS (
        DELETE FROM c.ready AS r
        WHERE r.job_id = ANY (ARRAY(
            SELECT x.job_id FROM c.ready AS x
            WHERE x.queue = p_queue AND x.run_at <= p_now
            ORDER BY x.priority DESC, x.run_at, x.job_id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING r.job_id
    )
    UPDATE c.jobs AS j
    SET status = 'running', attempts = j.attempts + 1, lease_until = p_now + p_lease, locked_by = p_worker
    WHERE j.id = ANY (ARRAY(SELECT r.job_id FROM r))
    RETURNING j.id, j.attempts;
END
$$;
