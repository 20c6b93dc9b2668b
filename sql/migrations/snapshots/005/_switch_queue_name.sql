-- backoff._switch_queue_name(verb, queue, create): p_queue as pause_queue
-- and resume_queue (p_verb 'pause' or 'resume') take it, checked by one
-- rule: the name rule of enqueue (backoff._check_name), since a name no
-- job can have is no queue to act on and a paused lookalike must not be
-- made; and p_create must not be NULL (22023 naming the queue). Private.
CREATE OR REPLACE FUNCTION backoff._switch_queue_name(p_verb text, p_queue text, p_create boolean)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    IF p_create IS NULL THEN
        RAISE EXCEPTION 'cannot % queue "%": create must not be null', p_verb, p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN p_queue;
END
$$;
