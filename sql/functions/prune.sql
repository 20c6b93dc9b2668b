-- backoff.prune(older than, limit, now): delete up to p_limit finished jobs
-- (completed, dead_lettered, cancelled) whose completed_at is older than
-- p_now - p_older_than. No index serves it, on purpose: an index on
-- completed_at would be paid by every settle, and prune runs rarely. The
-- scan stops as soon as it has p_limit rows, and old rows sit early in the
-- heap (docs/adr/0009-retention-and-prune.md).
CREATE OR REPLACE FUNCTION backoff.prune(
    p_older_than interval,
    p_limit      integer DEFAULT 10000,
    p_now        timestamptz DEFAULT now()
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' OR NOT backoff._valid_span(p_older_than) THEN
        RAISE EXCEPTION 'prune: older_than must be between 0 and 876600 hours, got "%"', coalesce(p_older_than::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'prune: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    DELETE FROM backoff.jobs AS j
    WHERE j.id = ANY (ARRAY(
        SELECT f.id
        FROM backoff.jobs AS f
        WHERE f.status IN ('completed', 'dead_lettered', 'cancelled')
          AND f.completed_at < p_now - p_older_than
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.prune(interval, integer, timestamptz) IS
'Delete up to p_limit finished jobs (completed, dead_lettered, cancelled) whose completed_at is before p_now - p_older_than; returns how many. Dead letters are evidence: choose p_older_than long enough to read them. Call it repeatedly until it returns less than p_limit. Safe to run concurrently (FOR UPDATE SKIP LOCKED).
Errors: 22023 for a NULL or negative p_older_than, a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1);
SELECT backoff.prune(''7 days'', p_now => now() + interval ''8 days'') AS deleted;';
