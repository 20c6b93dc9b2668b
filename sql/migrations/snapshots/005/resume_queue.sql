-- backoff.resume_queue(queue, create, now): undo backoff.pause_queue;
-- claims of the queue start again. Returns true if the queue was paused,
-- false if it was not (a queue without a row is not paused). A name that
-- is no queue (no row, no job) is refused unless p_create, as pause_queue
-- refuses it: "resumed" must not be reported for a typo (docs/adr/0066).
-- A resume that changes the queue is recorded in backoff.queue_events.
-- Admin only.
CREATE OR REPLACE FUNCTION backoff.resume_queue(
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
BEGIN
    p_queue := backoff._switch_queue_name('resume', p_queue, p_create);
    p_now := backoff._now(p_now);
    UPDATE backoff.queues AS q SET paused = false, updated_at = pg_catalog.now()
    WHERE q.name = p_queue AND q.paused;
    IF FOUND THEN
        INSERT INTO backoff.queue_events (queue, action, role, at) VALUES (p_queue, 'resume', session_user, p_now);
        RETURN true;
    END IF;
    IF NOT p_create
       AND NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = p_queue)
       AND NOT backoff._queue_has_jobs(p_queue) THEN
        RAISE EXCEPTION 'cannot resume queue "%": no such queue (it has no jobs and no configuration)', p_queue
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Check the name, or pass p_create => true.';
    END IF;
    IF p_create THEN
        -- A known queue that runs, with its policy of today.
        INSERT INTO backoff.queues (name, policy, paused, updated_at)
        VALUES (p_queue, backoff._job_policy_name(NULL, p_queue), false, pg_catalog.now())
        ON CONFLICT (name) DO NOTHING;
    END IF;
    RETURN false;
END
$$;

COMMENT ON FUNCTION backoff.resume_queue(text, boolean, timestamptz) IS
'Resume p_queue after backoff.pause_queue: backoff.claim returns its due jobs again. Returns true if the queue was paused, false if it was not (a queue without a row in backoff.queues is not paused). A queue that has neither a row in backoff.queues nor any job is refused unless p_create is true (then it gets a row, not paused, with the policy it has now). A resume that changes the queue is recorded in backoff.queue_events (queue, action ''resume'', role = the login role, at = p_now). Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, a queue that does not exist (without p_create), a NULL p_create, or a bad p_now (p_now NULL is the database clock).
Example:
SELECT backoff.pause_queue(''emails'', p_create => true);
SELECT backoff.resume_queue(''emails'');';
