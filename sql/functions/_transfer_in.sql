-- backoff._transfer_in(queue, what, rows): writes on the shard a queue
-- moves to what backoff._transfer_out read on the shard it leaves
-- (docs/adr/0092). Idempotent, so that a mover killed at any point can
-- run again:
--   'jobs': each job gets a new id of this shard (its id carries the
--           shard, docs/adr/0034) and keeps the rest of its row; the old id
--           goes to backoff.moved_jobs, and a job whose old id is there
--           already is not copied again. Its dedupe key points to the new
--           id. Returns the old ids now recorded (a jsonb number each),
--           the ones the mover may delete where they came from;
--   'keys': the dedupe keys of the queue's unfinished jobs there, held
--           here for them while the move lasts (backoff._take_dedupe_key),
--           over a key here whose job is not unfinished;
--   'schedules': the schedules (a name taken here by another queue's
--           schedule is skipped); returns the names this queue now has
--           here, the ones the mover may delete where they came from;
--   'controls': the breaker, token bucket and failure log, replacing
--           this shard's.
-- Private; EXECUTE for backoff_admin.
CREATE OR REPLACE FUNCTION backoff._transfer_in(p_queue text, p_what text, p_rows jsonb[], p_now timestamptz DEFAULT now())
RETURNS jsonb[]
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
    v_id  bigint;
    v_c   jsonb;
BEGIN
    CASE p_what
    WHEN 'jobs' THEN
        FOR v_job IN
            SELECT r.* FROM unnest(p_rows) AS e, pg_catalog.jsonb_populate_record(NULL::backoff.jobs, e) AS r
        LOOP
            IF v_job.queue IS DISTINCT FROM p_queue OR v_job.status NOT IN ('pending', 'retrying', 'dead_lettered') THEN
                RAISE EXCEPTION 'transfer: job "%" of queue "%" (%) is not a waiting job or dead letter of queue "%"', v_job.id, v_job.queue, v_job.status, p_queue
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            CONTINUE WHEN EXISTS (SELECT FROM backoff.moved_jobs AS m WHERE m.from_id = v_job.id);
            v_id := pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass);
            INSERT INTO backoff.jobs (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                      lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                      dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                      lease_expiries, schedule, schedule_slot, segment)
            OVERRIDING SYSTEM VALUE
            VALUES (v_id, v_job.queue, v_job.payload, v_job.status, v_job.priority, v_job.attempts, v_job.max_attempts,
                    v_job.policy, v_job.run_at, NULL, v_job.locked_by, v_job.last_attempted_at, v_job.last_failed_at,
                    v_job.last_error, v_job.errors, v_job.dead_letter_reason, v_job.dedupe_key, v_job.created_at,
                    v_job.completed_at, v_job.uncounted_attempts, v_job.lease_expiries, v_job.schedule, v_job.schedule_slot,
                    CASE WHEN v_job.status = 'dead_lettered' THEN 0 ELSE backoff._current_segment() END);
            IF v_job.dedupe_key IS NOT NULL AND v_job.status <> 'dead_lettered' THEN
                INSERT INTO backoff.dedupe_keys AS k (queue, dedupe_key, job_id)
                VALUES (p_queue, v_job.dedupe_key, v_id)
                ON CONFLICT (queue, dedupe_key) DO UPDATE SET job_id = EXCLUDED.job_id
                WHERE k.job_id = v_job.id
                   OR NOT EXISTS (SELECT FROM backoff.jobs AS j
                                  WHERE j.id = k.job_id AND j.status IN ('pending', 'running', 'retrying', 'blocked'));
            END IF;
            INSERT INTO backoff.moved_jobs (from_id, job_id, queue, moved_at) VALUES (v_job.id, v_id, p_queue, p_now);
        END LOOP;
        RETURN ARRAY(
            SELECT pg_catalog.to_jsonb(m.from_id)
            FROM backoff.moved_jobs AS m
            WHERE m.from_id IN (SELECT (e OPERATOR(pg_catalog.->>) 'id')::bigint FROM unnest(p_rows) AS e));
    WHEN 'keys' THEN
        INSERT INTO backoff.dedupe_keys AS k (queue, dedupe_key, job_id)
        SELECT p_queue, e OPERATOR(pg_catalog.->>) 'dedupe_key', (e OPERATOR(pg_catalog.->>) 'job_id')::bigint
        FROM unnest(p_rows) AS e
        -- A key left here by an earlier move, or by a job finished since,
        -- holds nothing: the other shard's job takes it.
        ON CONFLICT (queue, dedupe_key) DO UPDATE SET job_id = EXCLUDED.job_id
        WHERE NOT EXISTS (SELECT FROM backoff.jobs AS j
                          WHERE j.id = k.job_id AND j.status IN ('pending', 'running', 'retrying', 'blocked'));
    WHEN 'schedules' THEN
        INSERT INTO backoff.schedules
        SELECT r.* FROM unnest(p_rows) AS e, pg_catalog.jsonb_populate_record(NULL::backoff.schedules, e) AS r
        WHERE r.queue = p_queue
        ON CONFLICT (name) DO NOTHING;
        RETURN ARRAY(
            SELECT pg_catalog.to_jsonb(s.name) FROM backoff.schedules AS s
            WHERE s.queue = p_queue AND s.name IN (SELECT e OPERATOR(pg_catalog.->>) 'name' FROM unnest(p_rows) AS e));
    WHEN 'controls' THEN
        v_c := p_rows[1];
        DELETE FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        DELETE FROM backoff.queue_tokens AS t WHERE t.queue = p_queue;
        DELETE FROM backoff.queue_failures AS f WHERE f.queue = p_queue;
        INSERT INTO backoff.queue_breakers
        SELECT r.* FROM pg_catalog.jsonb_populate_recordset(NULL::backoff.queue_breakers, v_c OPERATOR(pg_catalog.->) 'breakers') AS r
        WHERE r.queue = p_queue;
        INSERT INTO backoff.queue_tokens
        SELECT r.* FROM pg_catalog.jsonb_populate_recordset(NULL::backoff.queue_tokens, v_c OPERATOR(pg_catalog.->) 'tokens') AS r
        WHERE r.queue = p_queue;
        INSERT INTO backoff.queue_failures
        SELECT r.* FROM pg_catalog.jsonb_populate_recordset(NULL::backoff.queue_failures, v_c OPERATOR(pg_catalog.->) 'failures') AS r
        WHERE r.queue = p_queue;
    ELSE
        RAISE EXCEPTION 'transfer: unknown part "%"', p_what USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    RETURN NULL;
END
$$;
