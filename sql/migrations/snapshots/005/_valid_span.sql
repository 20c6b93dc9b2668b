-- backoff._valid_span(interval): true for NULL or a finite interval of at
-- most 876600 hours (100 years of 365.25 days, the bound of every policy
-- duration). Private. Leases, delays and windows beyond it would push a
-- timestamp out of PostgreSQL's range (22008) or, on PostgreSQL 17 where
-- intervals can be infinite, leave a lease that never expires; the callers
-- refuse them with 22023 instead.
CREATE OR REPLACE FUNCTION backoff._valid_span(p_value interval)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_value IS NULL
        OR (pg_catalog.isfinite(p_value) AND p_value <= interval '876600 hours' AND p_value >= interval '-876600 hours')
$$;
