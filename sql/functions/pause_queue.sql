-- backoff.pause_queue(queue): stop claims from a queue (claim skips a
-- paused queue; acquire, settling and heartbeats go on, so running jobs
-- finish). A queue without a row in backoff.queues gets one, with the
-- policy backoff._job_policy_name gives it today (so pausing changes no job's
-- policy). Returns true if the queue was running, false if it was already
-- paused. Admin only.
CREATE OR REPLACE FUNCTION backoff.pause_queue(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_was_paused boolean;
BEGIN
    -- The name rule of enqueue (backoff._check_name): a name no job can
    -- have is no queue to act on, and a paused lookalike must not be made.
    p_queue := backoff._check_name('queue', p_queue);
    SELECT q.paused INTO v_was_paused FROM backoff.queues AS q WHERE q.name = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO backoff.queues (name, policy, paused, updated_at)
        VALUES (p_queue, backoff._job_policy_name(NULL, p_queue), true, pg_catalog.now())
        ON CONFLICT (name) DO UPDATE SET paused = true, updated_at = pg_catalog.now();
        RETURN true;
    END IF;
    IF v_was_paused THEN
        RETURN false;
    END IF;
    UPDATE backoff.queues AS q SET paused = true, updated_at = pg_catalog.now() WHERE q.name = p_queue;
    RETURN true;
END
$$;

COMMENT ON FUNCTION backoff.pause_queue(text) IS
'Pause p_queue: backoff.claim returns no job of it until backoff.resume_queue. Jobs already running go on (they can still complete, fail, heartbeat and snooze), enqueue still adds jobs, and backoff.acquire of a job by id still works. A queue without a row in backoff.queues gets one with the policy it has now (backoff.job_policy), so pausing changes no job''s policy. Returns true if the queue was running, false if it was already paused. Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters.
Example:
SELECT backoff.pause_queue(''emails'');
SELECT name, policy, paused FROM backoff.queues;';
