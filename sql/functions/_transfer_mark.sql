-- backoff._transfer_mark(queue, direction, peer, generation): records that
-- the queue moves 'out' of this shard to shard peer, or 'in' from shard
-- peer, in the move numbered generation (backoff.queue_moves); a NULL
-- direction removes the row. A mark that says the same already is kept. For the mover
-- (backoffctl shards move, docs/adr/0092), which calls it on the shards
-- directly; idempotent. Private; EXECUTE for backoff_admin.
CREATE OR REPLACE FUNCTION backoff._transfer_mark(p_queue text, p_direction text, p_peer integer, p_generation bigint,
                                                  p_now timestamptz DEFAULT now())
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_direction IS NULL THEN
        DELETE FROM backoff.queue_moves AS m WHERE m.queue = p_queue;
    ELSE
        INSERT INTO backoff.queue_moves AS m (queue, direction, peer, generation, since)
        VALUES (p_queue, p_direction, p_peer, p_generation, p_now)
        ON CONFLICT (queue) DO UPDATE
        SET direction = EXCLUDED.direction, peer = EXCLUDED.peer, generation = EXCLUDED.generation, since = EXCLUDED.since
        WHERE m.direction IS DISTINCT FROM EXCLUDED.direction OR m.peer IS DISTINCT FROM EXCLUDED.peer;
    END IF;
    -- claim and enqueue read the marks only where backoff._moves_out says.
    IF backoff._moves_out() IS DISTINCT FROM EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.direction = 'out') THEN
        PERFORM backoff._publish_moves_out();
    END IF;
END
$$;
