-- backoff.pause_queue(queue, create, now): stop claims from a queue (claim
-- skips a paused queue; acquire, settling and heartbeats go on, so running
-- jobs finish). A queue without a row in backoff.queues gets one, with the
-- policy backoff._job_policy_name gives it today (so pausing changes no
-- job's policy). A name that is no queue (no row, no job) is refused
-- unless p_create: a typo must not leave a paused phantom queue behind
-- while the real one runs on (docs/adr/0066). A pause that changes the
-- queue is recorded in backoff.queue_events with the login role. Returns
-- true if the queue was running, false if it was already paused. Admin
-- only.
CREATE OR REPLACE FUNCTION backoff.pause_queue(
    p_queue  text,
    p_create boolean DEFAULT false,
    p_now    timestamptz DEFAULT now()
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_was_paused boolean;
BEGIN
    p_queue := backoff._switch_queue_name('pause', p_queue, p_create);
    p_now := backoff._now(p_now);
    SELECT q.paused INTO v_was_paused FROM backoff.queues AS q WHERE q.name = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        IF NOT p_create AND NOT backoff._queue_has_jobs(p_queue) THEN
            RAISE EXCEPTION 'cannot pause queue "%": no such queue (it has no jobs and no configuration)', p_queue
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Check the name, or pass p_create => true to create the queue paused.';
        END IF;
        INSERT INTO backoff.queues (name, policy, paused, updated_at)
        VALUES (p_queue, backoff._job_policy_name(NULL, p_queue), true, pg_catalog.now())
        ON CONFLICT (name) DO UPDATE SET paused = true, updated_at = pg_catalog.now();
    ELSIF v_was_paused THEN
        RETURN false;
    ELSE
        UPDATE backoff.queues AS q SET paused = true, updated_at = pg_catalog.now() WHERE q.name = p_queue;
    END IF;
    INSERT INTO backoff.queue_events (queue, action, role, at) VALUES (p_queue, 'pause', session_user, p_now);
    RETURN true;
END
$$;

COMMENT ON FUNCTION backoff.pause_queue(text, boolean, timestamptz) IS
'Pause p_queue: backoff.claim returns no job of it until backoff.resume_queue. Jobs already running go on (they can still complete, fail, heartbeat and snooze), enqueue still adds jobs, and backoff.acquire of a job by id still works. A queue without a row in backoff.queues gets one with the policy it has now (backoff.job_policy), so pausing changes no job''s policy. A queue that has neither a row in backoff.queues nor any job is refused unless p_create is true (then it is created paused). A pause that changes the queue is recorded in backoff.queue_events (queue, action ''pause'', role = the login role, at = p_now). Returns true if the queue was running, false if it was already paused. Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, a queue that does not exist (without p_create), a NULL p_create, or a bad p_now (p_now NULL is the database clock).
Example:
SELECT backoff.pause_queue(''emails'', p_create => true);
SELECT name, policy, paused FROM backoff.queues;
SELECT queue, action, role FROM backoff.queue_events;';
