-- backoff.queue_history(queue, limit): the newest pauses and resumes of a
-- queue, or of every queue, from backoff.queue_events (which pause_queue
-- and resume_queue write with the role that asked). A custom plan at every
-- call: with the queue the read walks queue_events_queue_idx backward,
-- without it the table in time order. Admin only, as the table is.
CREATE OR REPLACE FUNCTION backoff.queue_history(p_queue text DEFAULT NULL, p_limit integer DEFAULT 20)
RETURNS TABLE (queue text, action text, role text, at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'queue history: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT e.queue, e.action, e.role, e.at
    FROM backoff.queue_events AS e
    WHERE p_queue IS NULL OR e.queue = p_queue
    ORDER BY e.at DESC, e.id DESC
    LIMIT p_limit;
END
$$;

COMMENT ON FUNCTION backoff.queue_history(text, integer) IS
'The newest p_limit (default 20) pauses and resumes of queue p_queue (NULL: every queue), newest first: the queue, the action (pause or resume), the database role that asked and when. backoff.prune drops them with the finished jobs'' retention. Admin only.
Errors: 22023 for a p_limit below 1.
Example:
SELECT backoff.pause_queue(''emails'', p_create => true);
SELECT queue, action FROM backoff.queue_history(''emails'');';
