-- backoff._transfer_forget(queue, what, keys): removes what the mover
-- (docs/adr/0092) has written elsewhere, on the shard the queue leaves,
-- once the other shard holds it; returns how many rows went:
--   'jobs': the waiting and dead-lettered jobs of these ids (jsonb
--           numbers), with their dedupe keys and progress;
--   'schedules': the schedules of these names (jsonb strings);
--   'controls': the queue's breaker, token bucket and failure log.
-- And on the shard the queue moves to:
--   'keys': the dedupe keys held here for jobs of the other shard
--           ('keys' of backoff._transfer_in) but those of the ids given
--           (the ones still unfinished there, 'unfinished' of
--           backoff._transfer_out).
-- Private; EXECUTE for backoff_admin.
CREATE OR REPLACE FUNCTION backoff._transfer_forget(p_queue text, p_what text, p_keys jsonb[])
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
    v_n   integer;
BEGIN
    CASE p_what
    WHEN 'jobs' THEN
        v_ids := ARRAY(SELECT (e #>> '{}')::bigint FROM unnest(p_keys) AS e);
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = ANY (v_ids) AND j.queue = p_queue AND j.status IN ('pending', 'retrying', 'dead_lettered')
            RETURNING j.id
        ), k AS (
            DELETE FROM backoff.dedupe_keys AS k
            WHERE k.queue = p_queue AND k.job_id IN (SELECT d.id FROM d)
        ), p AS (
            DELETE FROM backoff.job_progress AS p
            WHERE p.job_id IN (SELECT d.id FROM d)
        )
        SELECT count(*) INTO v_n FROM d;
    WHEN 'schedules' THEN
        DELETE FROM backoff.schedules AS s
        WHERE s.queue = p_queue AND s.name IN (SELECT e #>> '{}' FROM unnest(p_keys) AS e);
        GET DIAGNOSTICS v_n = ROW_COUNT;
    WHEN 'controls' THEN
        DELETE FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        DELETE FROM backoff.queue_tokens AS t WHERE t.queue = p_queue;
        DELETE FROM backoff.queue_failures AS f WHERE f.queue = p_queue;
        v_n := 0;
    WHEN 'keys' THEN
        v_ids := ARRAY(SELECT (e #>> '{}')::bigint FROM unnest(p_keys) AS e);
        DELETE FROM backoff.dedupe_keys AS k
        WHERE k.queue = p_queue AND NOT (k.job_id = ANY (v_ids))
          AND NOT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = k.job_id);
        GET DIAGNOSTICS v_n = ROW_COUNT;
    ELSE
        RAISE EXCEPTION 'transfer: unknown part "%"', p_what USING ERRCODE = 'invalid_parameter_value';
    END CASE;
    RETURN v_n;
END
$$;
