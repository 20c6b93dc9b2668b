-- backoff._queue_burst(rate, burst): the size of a rate-limited queue's
-- token bucket (docs/adr/0045): its burst, else greatest(1, ceil(rate)),
-- at most 2147483647, an integer. Private; the one definition that claim
-- (backoff._claim_controlled), backoff.queue_state and backoff.prune read
-- the bucket through, each splitting it into least(16, burst) slots. One
-- expression, so it is inlined.
CREATE OR REPLACE FUNCTION backoff._queue_burst(p_rate double precision, p_burst integer)
RETURNS integer
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_burst, least(greatest(1, pg_catalog.ceil(p_rate)), 2147483647)::integer)
$$;
