-- backoff.schedule(policy, attempts, seed): the retry timeline of a named
-- policy, one row per failed attempt: the delay before the next try (jitter
-- included, from p_seed) and the cumulative wait since the first failure.
-- Every row comes from backoff._policy_delay_us, the function fail and reap
-- use, so the timeline is what jobs will really do.
CREATE OR REPLACE FUNCTION backoff.schedule(
    p_policy   text,
    p_attempts integer DEFAULT 10,
    p_seed     bigint DEFAULT 0
)
RETURNS TABLE (attempt integer, delay interval, cumulative interval)
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    -- 1000 rows of at most 100 years each stay inside interval's range.
    IF p_attempts IS NULL OR p_attempts < 1 OR p_attempts > 1000 THEN
        RAISE EXCEPTION 'attempts must be between 1 and 1000, got "%"', coalesce(p_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT g.n, d.v_delay, sum(d.v_delay) OVER (ORDER BY g.n)
        FROM generate_series(1, p_attempts) AS g(n)
        CROSS JOIN LATERAL (
            SELECT backoff._policy_delay_us(v_policy, g.n, coalesce(p_seed, 0)) * interval '1 microsecond' AS v_delay
        ) AS d
        ORDER BY g.n;
END
$$;

COMMENT ON FUNCTION backoff.schedule(text, integer, bigint) IS
'The retry timeline of the named policy: for failed attempts 1..p_attempts (at most 1000), the delay before the next try (jitter included, deterministic from p_seed, as for a job whose id is p_seed) and the cumulative wait. What an operator reads before choosing a policy; backoffctl schedule prints the same numbers. Raises 22023 for an unknown policy.
Example: SELECT * FROM backoff.schedule(''moderate'', 5, 42);';
