-- backoff._delay_us(...): the backoff delay in microseconds for failed
-- attempt p_attempt (1-based) under explicit policy parameters, jitter
-- included. Private: the one implementation of DESIGN §5 that every other
-- function calls. Durations are microseconds (bigint); arithmetic is in
-- float8, in the same order as the Go mirror (client/policy), so both give
-- the same result to the microsecond.
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
    v_delay float8;
    v_max   float8 := p_max_us::float8;
    v_len   integer;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got %', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 THEN
        RAISE EXCEPTION 'base must not be negative, got % µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 THEN
        RAISE EXCEPTION 'max must not be negative, got % µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        IF p_multiplier IS NULL OR p_multiplier = 'NaN'::float8 OR p_multiplier < 1 OR p_multiplier > 1000 THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got %', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got %', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_schedule_us[LEAST(p_attempt, v_len)]::float8;
        IF v_delay IS NULL OR v_delay < 0 THEN
            RAISE EXCEPTION 'schedule entries must not be negative, got %', coalesce(v_delay::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    v_delay := LEAST(v_delay, v_max);

    IF p_jitter IS DISTINCT FROM 'none' THEN
        v_u := backoff._jitter_unit(p_seed, p_attempt);
    END IF;
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL OR p_jitter_ratio = 'NaN'::float8 OR p_jitter_ratio < 0 OR p_jitter_ratio > 1 THEN
            RAISE EXCEPTION 'jitter_ratio must be between 0 and 1, got %', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    RETURN floor(v_delay)::bigint;
END
$$;
