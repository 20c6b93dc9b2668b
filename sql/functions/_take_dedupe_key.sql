-- backoff._take_dedupe_key(queue, dedupe key, job id): the unfinished job
-- that holds the key (held), or the key taken for job_id (p_job_id, else an
-- id drawn from the job sequence when the key is free). A partitioned backoff.jobs cannot hold a
-- unique index without its segment, so the keys of unfinished jobs live in
-- backoff.dedupe_keys, unique there (docs/adr/0061). A row whose job is no
-- longer unfinished (an admin's direct write to backoff.jobs) is taken over,
-- but while the queue moves in from another shard, one held for a job of
-- that shard (no job here has its id) stays held.
-- Private; enqueue and replay use it.
CREATE OR REPLACE FUNCTION backoff._take_dedupe_key(
    p_queue      text,
    p_dedupe_key text,
    p_job_id     bigint,
    OUT held     bigint,
    OUT job_id   bigint
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_holder bigint;
BEGIN
    FOR v_try IN 1..10 LOOP
        SELECT k.job_id INTO v_holder
        FROM backoff.dedupe_keys AS k
        WHERE k.queue = p_queue AND k.dedupe_key = p_dedupe_key;
        IF FOUND THEN
            IF v_holder = p_job_id
               OR EXISTS (SELECT FROM backoff.jobs AS j
                          WHERE j.id = v_holder AND j.status IN ('pending', 'running', 'retrying', 'blocked'))
               -- While the queue moves in (docs/adr/0092), a key held for a
               -- job of the shard it comes from stays held.
               OR (EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.queue = p_queue AND m.direction = 'in')
                   AND NOT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = v_holder)) THEN
                held := CASE WHEN v_holder IS DISTINCT FROM p_job_id THEN v_holder END;
                job_id := CASE WHEN v_holder = p_job_id THEN p_job_id END;
                RETURN;
            END IF;
            job_id := coalesce(p_job_id, job_id, pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass));
            UPDATE backoff.dedupe_keys AS k
            SET job_id = _take_dedupe_key.job_id
            WHERE k.queue = p_queue AND k.dedupe_key = p_dedupe_key AND k.job_id = v_holder;
            IF FOUND THEN
                RETURN;
            END IF;
        ELSE
            job_id := coalesce(p_job_id, job_id, pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass));
            INSERT INTO backoff.dedupe_keys (queue, dedupe_key, job_id)
            VALUES (p_queue, p_dedupe_key, _take_dedupe_key.job_id)
            ON CONFLICT (queue, dedupe_key) DO NOTHING;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'enqueue in queue "%": dedupe key "%" kept changing hands', p_queue, p_dedupe_key
        USING ERRCODE = 'serialization_failure';
END
$$;
