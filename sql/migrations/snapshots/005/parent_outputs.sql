-- backoff.parent_outputs(job id): what a job's parents left it, in one
-- call: one row per job it depends on, with the parent's status and
-- output (docs/adr/0087). The child's queue is scoped as backoff.job; the
-- parents are read through their child, whatever their queues, as the
-- child's worker needs them. prune keeps a finished parent while its child
-- is unfinished.
CREATE OR REPLACE FUNCTION backoff.parent_outputs(p_job_id bigint)
RETURNS TABLE (parent_id bigint, queue text, status text, on_failure text, output jsonb)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue text;
    v_scope text[];
BEGIN
    SELECT j.queue INTO v_queue FROM backoff.jobs AS j WHERE j.id = p_job_id;
    v_scope := backoff._work_scope();
    IF NOT FOUND OR (v_scope IS NOT NULL AND NOT v_queue OPERATOR(pg_catalog.~~) ANY (v_scope)) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    RETURN QUERY
    SELECT d.parent_id, p.queue, p.status, d.on_failure, o.output
    FROM backoff.job_dependencies AS d
    LEFT JOIN backoff.jobs AS p ON p.id = d.parent_id
    LEFT JOIN backoff.job_outputs AS o ON o.job_id = d.parent_id
    WHERE d.child_id = p_job_id
    ORDER BY d.parent_id;
END
$$;

COMMENT ON FUNCTION backoff.parent_outputs(bigint) IS
'The jobs job p_job_id depends on, one row each in id order: parent_id, its queue and status (NULL when prune has deleted it), the edge''s on_failure, and the output it recorded when it completed (NULL if none). No row for a job without dependencies. Workers and admins.
Errors: BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on.
Example:
SELECT * FROM backoff.enqueue_graph(''[{"ref": "a", "queue": "etl"}, {"ref": "b", "queue": "etl", "depends_on": ["a"]}]'');
SELECT id FROM backoff.claim(''etl'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1, p_output => ''{"rows": 42}'');
SELECT parent_id, status, output FROM backoff.parent_outputs(2);';
