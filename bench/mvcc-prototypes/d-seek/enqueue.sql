-- d.enqueue(queue, n): one set-based INSERT of n due jobs (the shape of
-- backoff.enqueue's bulk form without its checks).
CREATE FUNCTION d.enqueue(p_queue text, p_n integer, p_now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    INSERT INTO d.jobs (queue, payload, priority, run_at, created_at)
    SELECT p_queue, '{}', 0, p_now, p_now FROM generate_series(1, p_n);
    RETURN p_n;
END
$$;
