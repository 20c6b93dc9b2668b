-- backoff.resume_queue(queue): undo backoff.pause_queue; claims of the queue
-- start again. Returns true if the queue was paused, false if it was not
-- (a queue without a row is not paused). Admin only.
CREATE OR REPLACE FUNCTION backoff.resume_queue(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The name rule of enqueue (backoff._check_name): a name no job can
    -- have is no queue to act on, and a paused lookalike must not be made.
    p_queue := backoff._check_name('queue', p_queue);
    UPDATE backoff.queues AS q SET paused = false, updated_at = pg_catalog.now()
    WHERE q.name = p_queue AND q.paused;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.resume_queue(text) IS
'Resume p_queue after backoff.pause_queue: backoff.claim returns its due jobs again. Returns true if the queue was paused, false if it was not (a queue without a row in backoff.queues is not paused). Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters.
Example:
SELECT backoff.resume_queue(''emails'');';
