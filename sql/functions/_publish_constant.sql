-- backoff._publish_constant(function, returns, body): replace
-- backoff.<function>() with an IMMUTABLE SQL function whose body (SELECT
-- of a literal) is an answer read from the tables: the one way the
-- functions publish such an answer (backoff._current_segment,
-- backoff._moves_out, backoff._queues_held). The planner folds the call
-- into a constant, and replacing the function invalidates every cached
-- plan that folded it, in every session (docs/adr/0061). The callers say
-- when to publish and serialize their publishers. Private.
CREATE OR REPLACE FUNCTION backoff._publish_constant(p_function text, p_returns text, p_body text)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION backoff.%I() RETURNS %s LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        p_function, p_returns, p_body);
END
$$;
