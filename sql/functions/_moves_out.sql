-- backoff._publish_moves_out(): rewrite backoff._moves_out(), an
-- IMMUTABLE function that reads no table, to say whether a queue moves
-- away from this shard (a row 'out' in backoff.queue_moves, docs/adr/0092).
-- claim and enqueue read backoff.queue_moves only when it says so: the
-- table read on every call would be two more relations locked by their
-- transactions, past the 16 a backend takes by the fast path (claim and
-- complete lock 15). A plan that folded the old answer is invalidated with
-- the function. Called by backoff._transfer_mark, in the transaction that
-- changes the marks (the mover waits for the transactions that began
-- before it, docs/adr/0092), and at install. Private.
CREATE OR REPLACE FUNCTION backoff._publish_moves_out()
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM backoff._publish_constant('_moves_out', 'boolean',
        CASE WHEN EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.direction = 'out')
             THEN 'SELECT true' ELSE 'SELECT false' END);
END
$$;

SELECT backoff._publish_moves_out();
