-- backoff.replay_dead_letters(queue, now): every dead-lettered job of a
-- queue back to pending, as backoff.replay does it, in one statement. What it
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
DECLARE
    v_ids      bigint[];
    v_reasons  text[];
    v_keys     bigint;
    v_keyed    bigint;
BEGIN
    -- The name rule of enqueue (backoff._check_name): a name no job can
    -- have is no queue to act on, and a paused lookalike must not be made.
    p_queue := backoff._check_name('queue', p_queue);
    p_now := backoff._now(p_now);
    IF backoff._moved_away(p_queue) IS NOT NULL THEN
        RAISE EXCEPTION 'cannot replay the dead letters of queue "%": the queue moves to shard %, with its dead letters', p_queue, backoff._moved_away(p_queue)
            USING ERRCODE = 'object_in_use';
    END IF;
    -- A key whose job is no longer unfinished (an admin's direct write to
    -- backoff.jobs) holds nothing (backoff._take_dedupe_key).
    DELETE FROM backoff.dedupe_keys AS k
    WHERE k.queue = p_queue
      AND k.dedupe_key IN (SELECT j.dedupe_key FROM backoff.jobs AS j
                           WHERE j.queue = p_queue AND j.status = 'dead_lettered' AND j.dedupe_key IS NOT NULL)
      AND NOT EXISTS (SELECT FROM backoff.jobs AS u
                      WHERE u.id = k.job_id AND u.status IN ('pending', 'running', 'retrying', 'blocked'));
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
            SELECT k.job_id AS id FROM backoff.dedupe_keys AS k
            WHERE d.dedupe_key IS NOT NULL AND k.queue = p_queue AND k.dedupe_key = d.dedupe_key) AS h ON true
    ), moved AS (
        -- Back to the current segment (docs/adr/0061): the finished rows
        -- deleted and the live ones inserted in one statement.
        DELETE FROM backoff.jobs AS j
        USING verdict AS v
        WHERE j.id = v.id AND v.reason IS NULL
        RETURNING j.*
    ), done AS (
        INSERT INTO backoff.jobs AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'pending', d.priority, d.attempts, d.max_attempts, d.policy, p_now,
               NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error,
               backoff._push_error(d.errors, d.attempts, 0, p_now, NULL, NULL, 'replayed', NULL, session_user::text),
               NULL, d.dedupe_key, d.created_at, NULL, d.attempts,
               0, d.schedule, d.schedule_slot, backoff._current_segment()
        FROM moved AS d
        RETURNING j.id, j.queue, j.dedupe_key
    ), keys AS (
        -- A key a concurrent enqueue took after the check is not taken
        -- here: the counts below differ and nothing is replayed.
        INSERT INTO backoff.dedupe_keys (queue, dedupe_key, job_id)
        SELECT d.queue, d.dedupe_key, d.id FROM done AS d WHERE d.dedupe_key IS NOT NULL
        ON CONFLICT (queue, dedupe_key) DO NOTHING
        RETURNING 1
    )
    SELECT pg_catalog.array_agg(v.id ORDER BY v.id), pg_catalog.array_agg(v.reason ORDER BY v.id),
           (SELECT count(*) FROM keys), (SELECT count(*) FROM done AS d WHERE d.dedupe_key IS NOT NULL)
    INTO v_ids, v_reasons, v_keys, v_keyed
    FROM verdict AS v;
    IF v_keys <> v_keyed THEN
        RAISE EXCEPTION 'cannot replay the dead letters of queue "%": a concurrent enqueue took a dedupe key; nothing was replayed, try again', p_queue
            USING ERRCODE = 'BK003';
    END IF;

    RETURN QUERY
    SELECT t.id, t.reason IS NULL, t.reason
    FROM unnest(v_ids, v_reasons) AS t(id, reason);

    IF FOUND THEN
        -- Children kept waiting for a replayed job wait for its new run
        -- (docs/adr/0087).
        IF EXISTS (SELECT FROM backoff.job_dependencies AS d
                   WHERE d.parent_id = ANY (v_ids) AND d.state = 'waiting') THEN
            PERFORM backoff._reopen_dependents(
                ARRAY(SELECT t.id FROM unnest(v_ids, v_reasons) AS t(id, reason) WHERE t.reason IS NULL));
        END IF;
        PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.replay_dead_letters(text, timestamptz) IS
'Replay every dead-lettered job of p_queue in one statement, as backoff.replay would each (status pending, run_at = p_now, a fresh budget: uncounted_attempts = attempts, so the counted attempt is 0, and lease_expiries = 0, while attempts, the fencing token, keeps counting; dead_letter_reason and completed_at cleared, history kept, with a replayed entry naming the login role as backoff.replay appends), and return one row per dead letter, in id order: job_id, replayed, and for a job it left dead-lettered the reason. A job is left when its dedupe key is held by an unfinished job of the queue, or by an older dead letter with the same key that this call replays. Notifies channel backoff_jobs when it replayed anything. Admin only.
Errors: 55006 when the queue moves away from this shard (backoffctl shards move, docs/adr/0092), its dead letters with it; 22023 for a queue that is not 1 to 128 bytes without control or format characters, or a bad p_now (p_now NULL is the database clock); BK003 when a concurrent enqueue took a dedupe key between the check and the update (nothing is replayed; call again).
Example:
SELECT * FROM backoff.replay_dead_letters(''emails'');';
