-- backoff.compute_delay(...): the backoff delay of docs/design.md#backoff-math for explicit
-- policy parameters, no table involved: pure and IMMUTABLE, so it can be
-- used in indexes, generated columns, and by callers that keep their policy
-- elsewhere. Parameters a strategy or jitter does not use are ignored.
CREATE OR REPLACE FUNCTION backoff.compute_delay(
    p_strategy     text,
    p_base         interval,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule     interval[],
    p_max          interval,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_limit CONSTANT interval := interval '876600 hours';  -- 100 years of 365.25 days
    v_entry interval;
BEGIN
    -- Intervals are checked before they become microseconds: a huge interval
    -- would otherwise fail as a bigint overflow instead of a clear 22023.
    IF p_base IS NULL OR p_base < interval '0' OR p_base > c_limit THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%"', coalesce(p_base::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max IS NULL OR p_max < interval '0' OR p_max > c_limit THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%"', coalesce(p_max::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_strategy = 'schedule' THEN
        FOREACH v_entry IN ARRAY coalesce(p_schedule, '{}') LOOP
            IF v_entry IS NULL OR v_entry < interval '0' OR v_entry > c_limit THEN
                RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%"', coalesce(v_entry::text, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    RETURN backoff._delay_us(
        p_strategy,
        backoff._interval_us(p_base),
        p_multiplier,
        p_exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest(p_schedule) AS s),
        backoff._interval_us(p_max),
        p_jitter,
        p_jitter_ratio,
        p_attempt,
        p_seed) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.compute_delay(text, interval, float8, integer, interval[], interval, text, float8, integer, bigint) IS
'Backoff delay before the retry that follows failed attempt p_attempt (1-based), from explicit policy parameters: strategy none|fixed|linear|exponential|polynomial|schedule, then the cap p_max, then jitter none|full|equal|proportional with u from md5(''SEED:ATTEMPT''). Pure and IMMUTABLE; identical to the Go mirror (client/policy) to the microsecond. Raises 22023 naming the bad parameter. docs/policies.md has the formulas.
Example: SELECT backoff.compute_delay(''exponential'', ''1 second'', 2.0, 2, ''{}'', ''1 minute'', ''proportional'', 0.1, 3, 42);';
