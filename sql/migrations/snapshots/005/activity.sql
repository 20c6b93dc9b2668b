-- backoff.activity(since, bucket, now): what happened per queue and per
-- bucket of time in [p_since, p_now]: jobs completed, dead-lettered and
-- cancelled (by completed_at, read from jobs_finished_idx one queue at a
-- time) and failed attempts (the error history of the jobs whose
-- last_failed_at is in the range, found by jobs_failed_idx). Buckets are
-- aligned to multiples of p_bucket since 2000-01-01 00:00 UTC, not to
-- p_now, so a bucket that has ended reads the same on every call: a display
-- that refreshes (the web UI's chart) keeps the ended ones and asks only
-- for the rest (docs/adr/0048-overview-without-full-scans.md). Its cost
-- grows with the events in the range, not with the table. Admin only.
CREATE OR REPLACE FUNCTION backoff.activity(
    p_since  timestamptz,
    p_bucket interval DEFAULT '1 minute',
    p_now    timestamptz DEFAULT NULL
)
RETURNS TABLE (
    queue         text,
    bucket        timestamptz,
    completed     bigint,
    failed        bigint,
    dead_lettered bigint,
    cancelled     bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $$
BEGIN
    IF p_bucket IS NULL OR p_bucket < interval '1 second' OR NOT backoff._valid_span(p_bucket) THEN
        RAISE EXCEPTION 'activity: bucket must be between 1 second and 876600 hours, got "%"', coalesce(p_bucket::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    IF p_since IS NULL OR NOT pg_catalog.isfinite(p_since) THEN
        RAISE EXCEPTION 'activity: since must be a finite time, got "%"', coalesce(p_since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_since > p_now THEN
        RETURN;
    END IF;
    IF extract(epoch FROM p_now - p_since) / extract(epoch FROM p_bucket) > 100000 THEN
        RAISE EXCEPTION 'activity: at most 100000 buckets, got % buckets of "%" since "%"',
            pg_catalog.ceil(extract(epoch FROM p_now - p_since) / extract(epoch FROM p_bucket)), p_bucket, p_since
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH RECURSIVE finished_queues (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j
                WHERE j.completed_at IS NOT NULL AND j.queue > f.name ORDER BY j.queue LIMIT 1)
        FROM finished_queues AS f
        WHERE f.name IS NOT NULL
    ),
    finished AS (
        SELECT f.name,
               pg_catalog.date_bin(p_bucket, e.completed_at, '2000-01-01 00:00:00+00'::timestamptz) AS b,
               count(*) FILTER (WHERE e.status = 'completed') AS c,
               count(*) FILTER (WHERE e.status = 'dead_lettered') AS d,
               count(*) FILTER (WHERE e.status = 'cancelled') AS x
        FROM finished_queues AS f
        CROSS JOIN LATERAL (
            SELECT j.completed_at, j.status FROM backoff.jobs AS j
            WHERE j.queue = f.name AND j.completed_at >= p_since AND j.completed_at <= p_now
            OFFSET 0 -- one index-only range per queue, never a join over the whole table
        ) AS e
        WHERE f.name IS NOT NULL
        GROUP BY 1, 2
    ),
    failures AS (
        SELECT j.queue AS name,
               pg_catalog.date_bin(p_bucket, (h.entry ->> 'at')::timestamptz, '2000-01-01 00:00:00+00'::timestamptz) AS b,
               count(*) AS n
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(j.errors) AS h(entry)
        WHERE j.last_failed_at >= p_since
          -- Failed attempts only: not an operator's replay or cancel.
          AND coalesce(h.entry ->> 'kind', 'error') IN ('error', 'lease_expired')
          AND (h.entry ->> 'at')::timestamptz >= p_since
          AND (h.entry ->> 'at')::timestamptz <= p_now
        GROUP BY 1, 2
    )
    SELECT coalesce(fi.name, fa.name), coalesce(fi.b, fa.b), coalesce(fi.c, 0), coalesce(fa.n, 0),
           coalesce(fi.d, 0), coalesce(fi.x, 0)
    FROM finished AS fi
    FULL JOIN failures AS fa ON fa.name = fi.name AND fa.b = fi.b
    ORDER BY 1, 2;
END
$$;

COMMENT ON FUNCTION backoff.activity(timestamptz, interval, timestamptz) IS
'Per queue and per bucket of p_bucket (default 1 minute) in [p_since, p_now] (both included): completed, dead_lettered and cancelled = jobs that reached that status then (completed_at), failed = failed attempts then (handler errors and expired leases, from the error history, which keeps the 20 most recent per job; its replayed and cancelled entries are no failures). Buckets are aligned to multiples of p_bucket since 2000-01-01 00:00 UTC (bucket is the start), so an ended bucket reads the same on later calls (the first and last bucket only count what lies in the range). Buckets where nothing happened are absent. Reads indexes: its cost grows with the events in the range, not with the table. Admin only.
Errors: 22023 for a bucket below 1 second or above 876600 hours, a p_since that is NULL or infinite (one after p_now gives no rows), more than 100000 buckets, or a bad p_now.
Example:
SELECT * FROM backoff.activity(now() - interval ''1 hour'');';
