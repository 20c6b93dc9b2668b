-- backoff._policy_delay_us(policy row, attempt, seed): _delay_us with the
-- parameters of a policies row. Private; shared by retry_delay, schedule and
-- the retry-or-dead-letter decision.
--
-- One expression without a subquery, so that PostgreSQL inlines it into the
-- decision (and the decision into reap's UPDATE): of a schedule, only the
-- entry for this attempt is converted and passed, as a one-entry schedule
-- (_delay_us takes entry least(attempt, length), which for one entry is that
-- entry); every other strategy ignores the schedule. A strategy 'schedule'
-- always has at least one entry (CHECK on backoff.policies).
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
        ARRAY[backoff._interval_us((p_policy).schedule[least(p_attempt, cardinality((p_policy).schedule))])],
        backoff._interval_us((p_policy).max_delay),
        (p_policy).jitter,
        (p_policy).jitter_ratio,
        p_attempt,
        p_seed)
$$;
