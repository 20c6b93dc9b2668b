-- backoff._policy_capped_us(policy row, attempt): the delay of a stored
-- policy for failed attempt p_attempt before jitter, capped at max_delay, as
-- the float8 that backoff._delay_us computes before it applies the jitter;
-- NULL for an attempt below 1 (or NULL). Private: the part of the delay that
-- does not depend on the job, so that reap computes it once per distinct
-- (policy, counted attempt) of its batch (docs/adr/0052) and
-- backoff._policy_delay_us adds the job's jitter.
--
-- No validation: a policies row passed its CHECK constraints (strategy,
-- durations within 100 years, multiplier 1..1000, exponent 1..10, a
-- non-empty schedule for strategy 'schedule'), which are _delay_us's
-- checks. Same float8 operations, in the same order, as _delay_us (and the
-- Go mirror, docs/adr/0004): only the power loop needs PL/pgSQL
-- (_clamped_power), so this is one expression that PostgreSQL inlines.
CREATE OR REPLACE FUNCTION backoff._policy_capped_us(
    p_policy  backoff.policies,
    p_attempt integer
)
RETURNS float8
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_attempt >= 1 THEN LEAST(
               CASE (p_policy).strategy
                   WHEN 'none' THEN 0::float8
                   WHEN 'fixed' THEN backoff._interval_us((p_policy).base)::float8
                   WHEN 'linear' THEN backoff._interval_us((p_policy).base)::float8 * p_attempt::float8
                   WHEN 'exponential'
                       THEN backoff._interval_us((p_policy).base)::float8 * backoff._clamped_power((p_policy).multiplier, p_attempt - 1)
                   WHEN 'polynomial'
                       THEN backoff._interval_us((p_policy).base)::float8 * backoff._clamped_power(p_attempt::float8, (p_policy).exponent)
                   WHEN 'schedule'
                       THEN backoff._interval_us((p_policy).schedule[LEAST(p_attempt, cardinality((p_policy).schedule))])::float8
               END,
               backoff._interval_us((p_policy).max_delay)::float8)
           END
$$;
