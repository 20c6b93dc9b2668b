-- backoff._refuse_moved_job(job id, action): raises 55006 when the job is
-- waiting (pending, retrying, blocked) or dead-lettered in a queue that
-- moves away from this shard: the mover copies such jobs, so acting on the
-- one left here would act on a job that runs elsewhere. Running and
-- finished jobs are left alone (they stay here). Private.
CREATE OR REPLACE FUNCTION backoff._refuse_moved_job(p_job_id bigint, p_action text)
RETURNS void
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue text;
    v_peer  integer;
BEGIN
    IF NOT EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.direction = 'out') THEN
        RETURN;
    END IF;
    SELECT j.queue, m.peer INTO v_queue, v_peer
    FROM backoff.jobs AS j
    JOIN backoff.queue_moves AS m ON m.queue = j.queue AND m.direction = 'out'
    WHERE j.id = p_job_id AND j.status IN ('pending', 'retrying', 'blocked', 'dead_lettered');
    IF FOUND THEN
        RAISE EXCEPTION 'cannot % job "%": its queue "%" moves to shard %, where its waiting jobs and dead letters go', p_action, p_job_id, v_queue, v_peer
            USING ERRCODE = 'object_in_use',
                  HINT = 'Look the job up again after the move (backoffctl shards move); moved jobs get new ids, listed in backoff.moved_jobs on the new shard.';
    END IF;
END
$$;
