-- backoff._policy_delay_us(policy row, attempt, seed): _delay_us with the
-- parameters of a policies row. Private; shared by retry_delay, schedule and
-- the retry-or-dead-letter decision.
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy  backoff.policies,
    p_attempt integer,
    p_seed    bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT backoff._delay_us(
        (p_policy).strategy,
        backoff._interval_us((p_policy).base),
        (p_policy).multiplier,
        (p_policy).exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest((p_policy).schedule) AS s),
        backoff._interval_us((p_policy).max_delay),
        (p_policy).jitter,
        (p_policy).jitter_ratio,
        p_attempt,
        p_seed)
$$;
