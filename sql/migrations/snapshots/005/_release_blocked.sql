-- backoff._release_blocked(ids, now): the blocked jobs among p_ids become
-- pending, in the current segment, and a worker waiting for their queue is
-- woken at commit when one is due. Their counters go. Called by
-- backoff._settle_dependents when a child's last parent settles, and by
-- backoff.unblock. An UPDATE that missed a row backoff.rotate moved while
-- it waited runs again (a new statement sees the moved row), twice at most.
-- Private.
CREATE OR REPLACE FUNCTION backoff._release_blocked(p_ids bigint[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_left   bigint[] := p_ids;
    v_queues text[]   := '{}';
    v_due    text[];
BEGIN
    DELETE FROM backoff.job_blockers AS b WHERE b.job_id = ANY (p_ids);
    FOR v_try IN 1..3 LOOP
        WITH u AS (
            UPDATE backoff.jobs AS j
            SET status = 'pending'
            WHERE j.id = ANY (v_left)
              AND j.status = 'blocked'
            RETURNING j.queue, j.run_at
        )
        SELECT array_agg(DISTINCT u.queue) FILTER (WHERE u.run_at <= p_now) INTO v_due FROM u;
        v_queues := v_queues || coalesce(v_due, '{}');
        v_left := ARRAY(SELECT j.id FROM backoff.jobs AS j WHERE j.id = ANY (v_left) AND j.status = 'blocked');
        EXIT WHEN cardinality(v_left) = 0;
    END LOOP;
    -- A claim reads the current segment only (docs/adr/0061).
    PERFORM backoff._move_to_current_segment(p_ids);
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_queues) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;
