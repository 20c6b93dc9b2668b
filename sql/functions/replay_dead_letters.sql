-- backoff.replay_dead_letters(queue, now): every dead-lettered job of a
-- queue back to pending, as backoff.replay does it, in one UPDATE. What it
-- cannot replay it leaves dead-lettered and reports, one row per job with
-- the reason, instead of failing the whole batch: today that is a dedupe
-- key held by an unfinished job of the queue (or by an older dead letter
-- replayed in the same call). Like replay, it gives a fresh budget
-- (uncounted_attempts = attempts) and keeps the fencing token counting
-- (docs/adr/0020): a worker still running a dead letter's reaped attempt
-- cannot settle the replayed job's next claim. Admin only.
CREATE OR REPLACE FUNCTION backoff.replay_dead_letters(
    p_queue text,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (job_id bigint, replayed boolean, reason text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- The name rule of enqueue (backoff._check_name): a name no job can
    -- have is no queue to act on, and a paused lookalike must not be made.
    p_queue := backoff._check_name('queue', p_queue);
    p_now := backoff._now(p_now);
    RETURN QUERY
    WITH locked AS MATERIALIZED (
        SELECT j.id, j.dedupe_key
        FROM backoff.jobs AS j
        WHERE j.queue = p_queue AND j.status = 'dead_lettered'
        ORDER BY j.id
        FOR UPDATE
    ), dead AS MATERIALIZED (
        SELECT l.id, l.dedupe_key,
               pg_catalog.row_number() OVER (PARTITION BY l.dedupe_key ORDER BY l.id) AS nth
        FROM locked AS l
    ), verdict AS MATERIALIZED (
        SELECT d.id,
               CASE
                   WHEN d.dedupe_key IS NULL THEN NULL
                   WHEN h.id IS NOT NULL THEN
                       pg_catalog.format('dedupe key %s is held by unfinished job %s', pg_catalog.quote_literal(d.dedupe_key), h.id)
                   WHEN d.nth > 1 THEN
                       pg_catalog.format('dedupe key %s is held by job %s, replayed in this call', pg_catalog.quote_literal(d.dedupe_key),
                                         (SELECT f.id FROM dead AS f WHERE f.dedupe_key = d.dedupe_key AND f.nth = 1))
               END AS reason
        FROM dead AS d
        LEFT JOIN LATERAL (
            SELECT u.id FROM backoff.jobs AS u
            WHERE d.dedupe_key IS NOT NULL AND u.queue = p_queue AND u.dedupe_key = d.dedupe_key
              AND u.status IN ('pending', 'running', 'retrying')
            LIMIT 1) AS h ON true
    ), done AS (
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            uncounted_attempts = j.attempts,
            lease_expiries = 0,
            run_at = p_now,
            dead_letter_reason = NULL,
            completed_at = NULL,
            lease_until = NULL,
            locked_by = NULL,
            errors = backoff._push_error(j.errors, j.attempts, 0, p_now, NULL, NULL, 'replayed', NULL, session_user::text)
        FROM verdict AS v
        WHERE j.id = v.id AND v.reason IS NULL
        RETURNING j.id
    )
    SELECT v.id, v.reason IS NULL, v.reason
    FROM verdict AS v
    ORDER BY v.id;

    IF FOUND THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
    END IF;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'cannot replay the dead letters of queue "%": a concurrent enqueue took a dedupe key; nothing was replayed, try again', p_queue
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.replay_dead_letters(text, timestamptz) IS
'Replay every dead-lettered job of p_queue in one statement, as backoff.replay would each (status pending, run_at = p_now, a fresh budget: uncounted_attempts = attempts, so the counted attempt is 0, and lease_expiries = 0, while attempts, the fencing token, keeps counting; dead_letter_reason and completed_at cleared, history kept, with a replayed entry naming the login role as backoff.replay appends), and return one row per dead letter, in id order: job_id, replayed, and for a job it left dead-lettered the reason. A job is left when its dedupe key is held by an unfinished job of the queue, or by an older dead letter with the same key that this call replays. Notifies channel backoff_jobs when it replayed anything. Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, or a bad p_now (p_now NULL is the database clock); BK003 when a concurrent enqueue took a dedupe key between the check and the update (nothing is replayed; call again).
Example:
SELECT * FROM backoff.replay_dead_letters(''emails'');';
