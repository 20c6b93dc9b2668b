-- backoff._delay_us(...): the backoff delay in microseconds for failed
-- attempt p_attempt (1-based) under explicit policy parameters, jitter
-- included. Private: the one implementation of docs/design.md#backoff-math that every other
-- function calls. Durations are microseconds (bigint); arithmetic is in
-- float8, one operator at a time, in the same order as the Go mirror
-- (client/policy/delay.go), so both give the same result to the microsecond
-- (docs/adr/0004-identical-math-in-sql-and-go.md). Change one, change both,
-- and the shared vectors (client/policy/testdata/vectors.json) tell.
--
-- Limits (the same as the policies table's CHECKs and Policy.Validate):
-- durations 0..100 years (3155760000000000 µs, below 2^53 so exact in a
-- double), multiplier 1..1000, exponent 1..10, jitter_ratio 0 or
-- 0.000001..1 (a smaller ratio underflows float8, which PostgreSQL raises).
-- A NULL seed is seed 0.
CREATE OR REPLACE FUNCTION backoff._delay_us(
    p_strategy     text,
    p_base_us      bigint,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule_us  bigint[],
    p_max_us       bigint,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint
)
RETURNS bigint
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    c_limit_us CONSTANT bigint := 3155760000000000;  -- 100 years
    v_delay float8;
    v_max   float8;
    v_len   integer;
    v_entry bigint;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got "%"', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 OR p_base_us > c_limit_us THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%" µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 OR p_max_us > c_limit_us THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%" µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_max := p_max_us::float8;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        -- NaN compares above every number in PostgreSQL, so "> 1000" rejects it.
        IF p_multiplier IS NULL OR NOT (p_multiplier >= 1 AND p_multiplier <= 1000) THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got "%"', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got "%"', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_entry := p_schedule_us[LEAST(p_attempt, v_len)];
        IF v_entry IS NULL OR v_entry < 0 OR v_entry > c_limit_us THEN
            RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%" µs', coalesce(v_entry::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := v_entry::float8;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    -- The cap.
    v_delay := LEAST(v_delay, v_max);

    -- Jitter, with u from md5('SEED:ATTEMPT'). Each float8 operator rounds on
    -- its own; Go converts explicitly to stop fused multiply-add.
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL
           OR NOT (p_jitter_ratio = 0 OR (p_jitter_ratio >= 0.000001 AND p_jitter_ratio <= 1)) THEN
            RAISE EXCEPTION 'jitter_ratio must be 0 or between 0.000001 and 1, got "%"', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    -- Whole microseconds, rounded down: never above the cap.
    RETURN floor(v_delay)::bigint;
END
$$;
