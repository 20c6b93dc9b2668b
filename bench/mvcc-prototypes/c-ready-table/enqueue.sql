-- c.enqueue(queue, n): the jobs and their ready rows in one statement.
CREATE FUNCTION c.enqueue(p_queue text, p_n integer, p_now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    WITH ins AS (
        INSERT INTO c.jobs (queue, payload, priority, run_at, created_at)
        SELECT p_queue, '{}', 0, p_now, p_now FROM generate_series(1, p_n)
        RETURNING id, queue, priority, run_at
    )
    INSERT INTO c.ready (job_id, queue, priority, run_at) SELECT i.id, i.queue, i.priority, i.run_at FROM ins AS i;
    RETURN p_n;
END
$$;
