-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- A month counts as 30 days and a day as 24 hours: the linearization
-- PostgreSQL's interval comparison uses, so a CHECK such as
-- "base <= interval '876600 hours'" and this conversion agree. (extract(epoch)
-- alone would count a year as 365.25 days but compare it as 360.) Exact: the
-- months are taken out before extract(epoch …), which is numeric.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ((extract(year FROM p_interval) * 12 + extract(month FROM p_interval)) * 2592000000000
            + extract(epoch FROM p_interval - make_interval(years => extract(year FROM p_interval)::integer,
                                                            months => extract(month FROM p_interval)::integer)) * 1000000
           )::bigint
$$;
