-- backoff._policy_capped_us(policy row, attempt): the delay of a stored
-- policy for failed attempt p_attempt before jitter, capped at max_delay: the
-- float8 that backoff._delay_us computes before it applies the jitter; NULL
-- for an attempt below 1 (or NULL). Private: the part of the delay that does
-- not depend on the job, so that reap computes it once per distinct
-- (policy, counted attempt) of its batch and fail once (docs/adr/0052);
-- backoff._policy_delay_us adds the job's jitter.
--
-- No validation: a policies row passed its CHECK constraints (strategy,
-- durations within 100 years, multiplier 1..1000, exponent 1..10, a
-- non-empty schedule for strategy 'schedule'), which are _delay_us's
-- checks. The same float8 operations, in the same order, as _delay_us (and
-- the Go mirror, docs/adr/0004). PL/pgSQL, not an inlined expression, on
-- purpose: it runs once per batch and policy, and fail initialises every
-- expression of its UPDATE on each call, so a small call node beats a large
-- inlined tree there (measured in docs/adr/0052).
CREATE OR REPLACE FUNCTION backoff._policy_capped_us(
    p_policy  backoff.policies,
    p_attempt integer
)
RETURNS float8
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    c_limit CONSTANT float8 := 1152921504606846976.0;  -- 2^60
    v_delay  float8;
    v_result float8 := 1.0;
    v_square float8;
    v_k      integer;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RETURN NULL;
    END IF;
    CASE p_policy.strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8;
    WHEN 'linear' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * backoff._clamped_power(p_policy.multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * backoff._clamped_power(p_attempt::float8, p_policy.exponent);
    ELSE
        v_delay := backoff._interval_us(p_policy.schedule[LEAST(p_attempt, cardinality(p_policy.schedule))])::float8;
    END CASE;
    RETURN LEAST(v_delay, backoff._interval_us(p_policy.max_delay)::float8);
END
$$;
