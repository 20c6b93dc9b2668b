-- backoff._span_text(span): a duration as an operator reads it, in its two
-- largest units: 45s, 12m 3s, 2h 5m, 3d 4h (a negative one is 0s; NULL
-- is NULL).
-- Private.
CREATE OR REPLACE FUNCTION backoff._span_text(p_span interval)
RETURNS text
LANGUAGE sql
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
               WHEN x.s >= 86400 THEN pg_catalog.format('%sd %sh', x.s / 86400, x.s % 86400 / 3600)
               WHEN x.s >= 3600 THEN pg_catalog.format('%sh %sm', x.s / 3600, x.s % 3600 / 60)
               WHEN x.s >= 60 THEN pg_catalog.format('%sm %ss', x.s / 60, x.s % 60)
               ELSE pg_catalog.format('%ss', x.s)
           END
    FROM (SELECT GREATEST(pg_catalog.floor(EXTRACT(epoch FROM p_span)), 0)::bigint AS s) AS x
$$;
