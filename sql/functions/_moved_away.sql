-- backoff._moved_away(queue): the shard the queue is moving or has moved
-- to from this one (a row 'out' in backoff.queue_moves, written by
-- backoffctl shards move, docs/adr/0092), else NULL. Enqueue refuses such
-- a queue (55006), claim gives nothing, acquire, replay and cancel refuse
-- its waiting and dead-lettered jobs, and fire_schedules passes over its
-- schedules: once the mover has waited for the transactions that did not
-- see the row, its copies of the queue's waiting jobs are the only ones.
-- Private.
CREATE OR REPLACE FUNCTION backoff._moved_away(p_queue text)
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT m.peer FROM backoff.queue_moves AS m WHERE m.queue = p_queue AND m.direction = 'out'
$$;
