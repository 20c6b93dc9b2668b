-- backoff._policy_delay_us(policy row, attempt, seed [, capped]): the delay
-- in microseconds of a stored policy for failed attempt p_attempt, jitter
-- seeded by p_seed included: what backoff._delay_us returns for the row's
-- parameters, to the bit. Private; shared by retry_delay, schedule and the
-- retry-or-dead-letter decision.
--
-- The four-argument form takes p_capped_us = backoff._policy_capped_us(
-- p_policy, p_attempt), the part that does not depend on the job, so that
-- reap computes it once per distinct (policy, counted attempt) of its batch
-- (docs/adr/0052), and adds the jitter: one expression, inlined into the
-- decision, whose only call per row is md5 (_jitter_unit) when the policy
-- has jitter. No validation: the row passed the policies table's CHECKs.
-- An attempt below 1 (or NULL) goes to _delay_us, which raises 22023 as it
-- always did. The jitter arithmetic is _delay_us's, operator for
-- operator (docs/adr/0004).
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy    backoff.policies,
    p_attempt   integer,
    p_seed      bigint,
    p_capped_us float8
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_attempt >= 1 THEN floor(
               CASE (p_policy).jitter
                   WHEN 'none' THEN p_capped_us
                   WHEN 'full' THEN p_capped_us * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)
                   WHEN 'equal'
                       THEN p_capped_us / 2 + p_capped_us / 2 * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)
                   WHEN 'proportional'
                       THEN LEAST(p_capped_us * (1 - (p_policy).jitter_ratio
                                                 + 2 * (p_policy).jitter_ratio * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)),
                                  backoff._interval_us((p_policy).max_delay)::float8)
               END)::bigint
           -- Raises 22023 "attempt must be at least 1, got ..." (the first
           -- thing _delay_us checks), as it always did.
           ELSE backoff._delay_us('none', 0, 1, 1, NULL, 0, 'none', 0, p_attempt, p_seed)
           END
$$;

-- The three-argument form, for one delay at a time (retry_delay, schedule).
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy  backoff.policies,
    p_attempt integer,
    p_seed    bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT backoff._policy_delay_us(p_policy, p_attempt, p_seed, backoff._policy_capped_us(p_policy, p_attempt))
$$;
