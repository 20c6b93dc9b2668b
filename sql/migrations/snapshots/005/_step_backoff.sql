-- backoff._step_backoff(request, attempts, max, multiplier): validates the
-- parameters of calculate_step_next_retry_time and returns the delay of its
-- fallback path, LEAST(multiplier^attempts seconds, max seconds). Private;
-- shared by the timestamptz and timestamp overloads.
--
-- tasker-core's expression power(multiplier, attempts) overflows numeric
-- (and float8) for large attempts. Here the cap is decided before any
-- exponentiation: when attempts × ln(multiplier) exceeds ln(max) + 1, the
-- power is above e × max and the result is max; the margin of 1 is far wider
-- than any float8 rounding of the logarithms. Otherwise the power is at most
-- about 2.7 × max (≤ 5.9e9) and is computed with the original expression,
-- so every result the original could compute comes out the same: numeric
-- power, then PostgreSQL's interval multiplication, which rounds fractional
-- seconds to the nearest microsecond (1.1^3 → 1.331 s).
--
-- attempts NULL follows the original too: LEAST ignores the NULL power, so
-- the delay is max.
CREATE OR REPLACE FUNCTION backoff._step_backoff(
    p_request_seconds integer,
    p_attempts        integer,
    p_max_seconds     integer,
    p_multiplier      numeric
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_max interval;
BEGIN
    IF p_request_seconds < 0 THEN
        RAISE EXCEPTION 'backoff_request_seconds must not be negative, got "%"', p_request_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempts < 0 THEN
        RAISE EXCEPTION 'attempts must not be negative, got "%"', p_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_seconds IS NULL OR p_max_seconds <= 0 THEN
        RAISE EXCEPTION 'p_max_backoff_seconds must be positive, got "%"', coalesce(p_max_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- NaN is neither < 1 nor finite; 'Infinity' is not finite.
    IF p_multiplier IS NULL OR p_multiplier = 'NaN'::numeric OR p_multiplier = 'Infinity'::numeric
       OR p_multiplier < 1 THEN
        RAISE EXCEPTION 'p_backoff_multiplier must be a finite number of at least 1, got "%"', coalesce(p_multiplier::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_max := p_max_seconds * interval '1 second';
    IF p_attempts IS NULL THEN
        RETURN v_max;
    END IF;
    IF p_attempts > 0 AND p_multiplier > p_max_seconds THEN
        RETURN v_max;  -- multiplier^attempts >= multiplier > max (and ln needs no huge float8)
    END IF;
    IF p_attempts::float8 * ln(p_multiplier::float8) > ln(p_max_seconds::float8) + 1 THEN
        RETURN v_max;
    END IF;
    RETURN LEAST(power(p_multiplier, p_attempts::numeric) * interval '1 second', v_max);
END
$$;
