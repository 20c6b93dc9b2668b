-- backoff.unblock(job id, now): an operator releases a blocked job from
-- the parents that failed under a 'wait' edge (docs/adr/0087): those edges
-- are 'released', and the job becomes pending when no parent is still
-- open, else it goes on waiting for those. The counter is locked first,
-- as a settling parent locks it. Admin only.
CREATE OR REPLACE FUNCTION backoff.unblock(
    p_job_id bigint,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job     backoff.jobs;
    v_left    integer;
    v_waiting integer;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot unblock job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    SELECT b.remaining, b.waiting INTO v_left, v_waiting
    FROM backoff.job_blockers AS b
    WHERE b.job_id = p_job_id
    FOR UPDATE;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    IF v_job.status <> 'blocked' OR coalesce(v_waiting, 0) = 0 THEN
        RAISE EXCEPTION 'cannot unblock job "%": it is "%" and no failed parent keeps it waiting', p_job_id, v_job.status
            USING ERRCODE = 'BK003',
                  HINT = 'a job blocked by parents that have not finished waits for them; cancel it to give it up';
    END IF;
    UPDATE backoff.job_dependencies AS d SET state = 'released'
    WHERE d.child_id = p_job_id AND d.state = 'waiting';
    IF v_left = 0 THEN
        DELETE FROM backoff.job_blockers AS b WHERE b.job_id = p_job_id;
        PERFORM backoff._release_blocked(ARRAY[p_job_id], p_now);
    ELSE
        UPDATE backoff.job_blockers AS b SET waiting = 0 WHERE b.job_id = p_job_id;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.unblock(bigint, timestamptz) IS
'Release blocked job p_job_id from the parents that failed (dead_lettered or cancelled) under an edge with on_failure ''wait'': those edges count as satisfied, and the job becomes pending if no other parent is still unfinished, else it waits for those. Returns the job. To run the failed parent again instead, replay it: the child then waits for its new run. Admin only.
Errors: BK001 no such job; BK003 it is not blocked, or no failed parent keeps it waiting; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT * FROM backoff.enqueue_graph(''[{"ref": "a", "queue": "etl"}, {"ref": "b", "queue": "etl", "depends_on": [{"ref": "a", "on_failure": "wait"}]}]'');
SELECT backoff.cancel(1, ''source gone'');
SELECT id, status FROM backoff.unblock(2);';
