-- backoff._transfer_out(queue, what, limit): what the mover (backoffctl
-- shards move, docs/adr/0092) reads of a queue on the shard it leaves,
-- as jsonb rows:
--   'check': nothing; refused (55006) while the queue has blocked jobs
--           or jobs in a workflow, whose edges stay on one shard (once the
--           shard is marked, no graph can start there);
--   'jobs': up to p_limit waiting (pending, retrying) and dead-lettered
--           jobs, whole rows, by id;
--   'copied': the old ids of the jobs copied here (backoff.moved_jobs),
--           which an abort deletes where they came from first;
--   'keys': the dedupe keys of the queue's unfinished jobs
--           ({dedupe_key, job_id});
--   'schedules': the queue's schedules, whole rows;
--   'controls': one object: the queue's breaker, token bucket slots and
--           failure log;
--   'state': one object: how many jobs are waiting, dead-lettered,
--           blocked and running;
-- and, on the shard the queue moves to:
--   'held': the jobs of other shards for which a dedupe key of the
--           queue is held here (backoff._transfer_in's 'keys');
-- and, on the shard it leaves, of the jobs p_ids:
--   'unfinished': those that are unfinished here.
-- Private; EXECUTE for backoff_admin.
CREATE OR REPLACE FUNCTION backoff._transfer_out(p_queue text, p_what text, p_limit integer DEFAULT 1000,
                                                  p_ids jsonb[] DEFAULT NULL)
RETURNS jsonb[]
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE p_what
    WHEN 'check' THEN
        IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.status = 'blocked')
           OR EXISTS (SELECT FROM backoff.jobs AS j
                      WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying', 'running', 'dead_lettered')
                        AND (EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.child_id = j.id)
                             OR EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = j.id))) THEN
            RAISE EXCEPTION 'cannot move queue "%": it has blocked jobs or jobs in a workflow, whose edges stay on one shard', p_queue
                USING ERRCODE = 'object_in_use',
                      HINT = 'Let the workflows finish (or cancel them), then run the move again; or abort it (backoffctl shards move QUEUE --abort).';
        END IF;
        RETURN NULL;
    WHEN 'jobs' THEN
        RETURN ARRAY(
            SELECT pg_catalog.to_jsonb(j)
            FROM backoff.jobs AS j
            WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying', 'dead_lettered')
            ORDER BY j.id
            LIMIT p_limit);
    WHEN 'copied' THEN
        RETURN ARRAY(SELECT pg_catalog.to_jsonb(m.from_id) FROM backoff.moved_jobs AS m WHERE m.queue = p_queue);
    WHEN 'keys' THEN
        RETURN ARRAY(
            SELECT pg_catalog.jsonb_build_object('dedupe_key', k.dedupe_key, 'job_id', k.job_id)
            FROM backoff.dedupe_keys AS k
            JOIN backoff.jobs AS j ON j.id = k.job_id AND j.status IN ('pending', 'retrying', 'running', 'blocked')
            WHERE k.queue = p_queue);
    WHEN 'schedules' THEN
        RETURN ARRAY(SELECT pg_catalog.to_jsonb(s) FROM backoff.schedules AS s WHERE s.queue = p_queue ORDER BY s.name);
    WHEN 'controls' THEN
        RETURN ARRAY[pg_catalog.jsonb_build_object(
            'breakers', (SELECT coalesce(pg_catalog.jsonb_agg(b), '[]') FROM backoff.queue_breakers AS b WHERE b.queue = p_queue),
            'tokens', (SELECT coalesce(pg_catalog.jsonb_agg(t), '[]') FROM backoff.queue_tokens AS t WHERE t.queue = p_queue),
            'failures', (SELECT coalesce(pg_catalog.jsonb_agg(f), '[]') FROM backoff.queue_failures AS f WHERE f.queue = p_queue))];
    WHEN 'state' THEN
        RETURN ARRAY[(
            SELECT pg_catalog.jsonb_build_object(
                'waiting', count(*) FILTER (WHERE j.status IN ('pending', 'retrying')),
                'dead_lettered', count(*) FILTER (WHERE j.status = 'dead_lettered'),
                'blocked', count(*) FILTER (WHERE j.status = 'blocked'),
                'running', count(*) FILTER (WHERE j.status = 'running'))
            FROM backoff.jobs AS j
            WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying', 'dead_lettered', 'blocked', 'running'))];
    WHEN 'held' THEN
        RETURN ARRAY(
            SELECT pg_catalog.to_jsonb(k.job_id)
            FROM backoff.dedupe_keys AS k
            WHERE k.queue = p_queue AND NOT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = k.job_id));
    WHEN 'unfinished' THEN
        RETURN ARRAY(
            SELECT pg_catalog.to_jsonb(j.id)
            FROM backoff.jobs AS j
            WHERE j.id IN (SELECT (e #>> '{}')::bigint FROM unnest(p_ids) AS e)
              AND j.status IN ('pending', 'retrying', 'running', 'blocked'));
    ELSE
        RAISE EXCEPTION 'transfer: unknown part "%"', p_what USING ERRCODE = 'invalid_parameter_value';
    END CASE;
END
$$;
