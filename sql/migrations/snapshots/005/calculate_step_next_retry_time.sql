-- backoff.calculate_step_next_retry_time(...): tasker-core's dual-path rule
-- (TAS-57), drop-in, with its parameter names and defaults: an explicit
-- request (backoff_request_seconds after last_attempted_at) wins; otherwise
-- failure_time + LEAST(multiplier^attempts seconds, max seconds); otherwise
-- NULL. Unlike the original it never overflows (attempts up to 2^31-1), and
-- rejects invalid parameters with 22023 whichever path applies. Fractional
-- seconds of the power are kept to the microsecond (rounded to nearest, as
-- the original expression does). The timestamp overload serves users of the
-- original's timestamp-without-time-zone columns.
CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamptz,
    failure_time            timestamptz,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamp,
    failure_time            timestamp,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamptz, timestamptz, integer, integer, numeric) IS
'tasker-core''s dual-path retry time: last_attempted_at + backoff_request_seconds when both are given; else failure_time + LEAST(p_backoff_multiplier^attempts, p_max_backoff_seconds) seconds (fractions kept to the microsecond); else NULL. Never overflows, for any attempts up to 2^31-1. Raises 22023 naming the parameter for negative attempts or backoff_request_seconds, p_max_backoff_seconds <= 0, p_backoff_multiplier < 1, NaN or infinite.
Example: SELECT backoff.calculate_step_next_retry_time(NULL, NULL, ''2025-01-01 00:00:00+00'', 3);  -- 00:00:08';

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamp, timestamp, integer, integer, numeric) IS
'The timestamp-without-time-zone overload of calculate_step_next_retry_time, for drop-in users of tasker-core''s original: same rule, same errors.
Example: SELECT backoff.calculate_step_next_retry_time(30, ''2025-01-01 00:00:00'', NULL, 0);  -- 00:00:30';
