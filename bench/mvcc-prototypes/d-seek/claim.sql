-- d.claim(queue, worker, limit, lease, after_priority, after_run_at,
-- lookback): the baseline's claim, but the index scan starts at a cursor the
-- worker keeps (the claim-order key of the last job it claimed, returned
-- with every row) instead of at the head of the index. Under an old
-- snapshot the head is where the dead entries of every job claimed since
-- are: the seek jumps over them in one index descent.
--
-- Correctness: a job behind the cursor is not lost, only found later.
-- - Jobs whose enqueue committed after a claimer passed their run_at (the
--   enqueuer's clock was read at its transaction start): the seek starts
--   p_lookback before the cursor's run_at, so it walks only the dead
--   entries of that window.
-- - Jobs that sort before the cursor for good (a higher priority, a run_at
--   in the past, a row a claimer skipped because another held it and then
--   rolled back): the worker passes the head of the order ('-infinity')
--   every N calls, a full scan as in the baseline.
-- A job may therefore wait up to the full-scan period past where the
-- baseline would have claimed it. Priorities are exact only at full scans.
CREATE FUNCTION d.claim(p_queue text, p_worker text, p_limit integer, p_lease interval,
                        p_after_priority integer, p_after_run_at timestamptz, p_lookback interval,
                        p_now timestamptz DEFAULT now())
RETURNS TABLE (id bigint, attempts integer, priority integer, run_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    UPDATE d.jobs AS j
    SET status = 'running', attempts = j.attempts + 1, lease_until = p_now + p_lease, locked_by = p_worker
    WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM d.jobs AS c
        WHERE c.queue = p_queue AND c.status IN ('pending', 'retrying') AND c.run_at <= p_now
          AND (-c.priority, c.run_at) >= (-p_after_priority, p_after_run_at - p_lookback)
        ORDER BY -c.priority, c.run_at, c.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED))
    RETURNING j.id, j.attempts, j.priority, j.run_at;
END
$$;
