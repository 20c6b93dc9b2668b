-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- extract(epoch …) is numeric since PostgreSQL 14, so the conversion is exact.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT (extract(epoch FROM p_interval) * 1000000)::bigint
$$;
