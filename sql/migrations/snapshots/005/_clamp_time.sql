-- backoff._clamp_time(timestamptz): the time kept inside years 1 to 9999
-- (UTC), the range every client can represent (ADR 0039; a Go
-- time.Time marshals to JSON only up to year 9999). Private; applied to
-- every run_at and lease_until computed as a time plus an interval, so that
-- a long delay near the end of the range means "as late as possible"
-- instead of a year-10000 value that breaks readers. One expression, so it
-- is inlined.
CREATE OR REPLACE FUNCTION backoff._clamp_time(p_time timestamptz)
RETURNS timestamptz
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT LEAST(GREATEST(p_time, '0001-01-01 00:00:00+00'::timestamptz),
                            '9999-12-31 23:59:59.999999+00'::timestamptz)
$$;
