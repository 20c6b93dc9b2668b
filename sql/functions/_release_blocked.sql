-- backoff._release_blocked(ids, now): the blocked jobs among p_ids become
-- pending, in the current segment, and a worker waiting for their queue is
-- woken at commit when one is due. Called by backoff._settle_dependents
-- when a child's last parent settles, and by backoff.unblock, which have
-- deleted the jobs' counters (backoff.job_blockers). A statement that missed a row backoff.rotate moved
-- while it waited runs again (a new statement sees the moved row), twice
-- at most.
-- Private.
CREATE OR REPLACE FUNCTION backoff._release_blocked(p_ids bigint[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_left  bigint[] := p_ids;
    v_done  bigint[];
    v_moved bigint;
BEGIN
    -- A claim reads the current segment only (docs/adr/0061): a job blocked
    -- there since the last switch is released in place, one blocked in
    -- another segment moves into it as it is released. Each statement
    -- looks only for the jobs the ones before it left.
    FOR v_try IN 1..3 LOOP
        WITH u AS (
            UPDATE backoff.jobs AS j
            SET status = 'pending'
            WHERE j.segment = backoff._current_segment()
              AND j.id = ANY (v_left)
              AND j.status = 'blocked'
            RETURNING j.id
        )
        SELECT array_agg(u.id) INTO v_done FROM u;
        IF v_done IS NOT NULL THEN
            v_left := ARRAY(SELECT unnest(v_left) EXCEPT SELECT unnest(v_done));
        END IF;
        EXIT WHEN cardinality(v_left) = 0;
        v_moved := backoff._move_to_current_segment(v_left, p_release => true);
        EXIT WHEN v_moved = cardinality(v_left);
        v_left := ARRAY(SELECT j.id FROM backoff.jobs AS j WHERE j.id = ANY (v_left) AND j.status = 'blocked');
        EXIT WHEN cardinality(v_left) = 0;
    END LOOP;
    -- Only where a worker waits are the released jobs' queues looked up.
    IF EXISTS (SELECT FROM backoff.waiting_workers AS w WHERE w.expires_at > pg_catalog.now()) THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
        FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
              WHERE w.expires_at > pg_catalog.now()
                AND w.queue = ANY (ARRAY(SELECT DISTINCT j.queue FROM backoff.jobs AS j
                                         WHERE j.segment = backoff._current_segment()
                                           AND j.id = ANY (p_ids)
                                           AND j.status = 'pending'
                                           AND j.run_at <= p_now))) AS w;
    END IF;
END
$$;
