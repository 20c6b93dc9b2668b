-- backoff.job_output(job id): the output a job's completion recorded
-- (backoff.job_outputs, docs/adr/0087), or NULL when it recorded none or
-- has not completed. Scoped as backoff.job: a job of a queue the caller may
-- not work on or produce into looks missing.
CREATE OR REPLACE FUNCTION backoff.job_output(p_job_id bigint)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue  text;
    v_output jsonb;
BEGIN
    SELECT j.queue INTO v_queue FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND OR (backoff._scope_in_force()
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('work')), false)
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('produce')), false)) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    SELECT o.output INTO v_output FROM backoff.job_outputs AS o WHERE o.job_id = p_job_id;
    RETURN v_output;
END
$$;

COMMENT ON FUNCTION backoff.job_output(bigint) IS
'The output job p_job_id recorded when it completed (backoff.complete''s p_output, backoff.complete_many''s p_outputs), or NULL when it recorded none or has not completed. Kept until prune deletes the job. Workers, producers and admins.
Errors: BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may neither work on nor produce into.
Example:
SELECT backoff.enqueue(''thumbnails'');
SELECT id FROM backoff.claim(''thumbnails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1, p_output => ''{"url": "https://cdn.example.com/1.png"}'');
SELECT backoff.job_output(1);';
