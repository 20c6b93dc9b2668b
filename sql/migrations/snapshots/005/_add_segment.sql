-- backoff._add_segment(): one more live segment for backoff.jobs
-- (docs/adr/0082), for backoff.rotate when no segment it could switch to is
-- empty on disk: a transaction that has read backoff.jobs (a report,
-- pg_dump) holds ACCESS SHARE on every segment it read until it ends, so
-- none of them can be truncated, and a claim in a segment switched to
-- without truncation would walk its dead row versions. A table created now
-- was read by nobody.
--
-- The new table copies segment 1 (columns, defaults, CHECK constraints,
-- its own primary key and schedule-slot index, and the partitioned
-- indexes' definitions, which ATTACH then adopts as the parent's), so the
-- shape of a segment is decided once, by the migration that made segment
-- 1. ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on backoff.jobs, which
-- readers and writers do not conflict with; the table is empty, so
-- checking its partition bound reads nothing. Runs as the caller, which is
-- backoff.rotate, SECURITY DEFINER as backoff_owner: the owner of the new
-- table. Returns the new segment's number, the smallest not in
-- backoff.segments; the caller records it there.
CREATE OR REPLACE FUNCTION backoff._add_segment()
RETURNS smallint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seg smallint;
BEGIN
    SELECT g::smallint INTO v_seg
    FROM pg_catalog.generate_series(1, 32767) AS g
    WHERE NOT EXISTS (SELECT FROM backoff.segments AS s WHERE s.segment = g)
    ORDER BY g
    LIMIT 1;
    EXECUTE pg_catalog.format(
        'CREATE TABLE backoff.%I (LIKE backoff.jobs_live_1 INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)',
        'jobs_live_' || v_seg);
    EXECUTE pg_catalog.format('ALTER TABLE backoff.jobs ATTACH PARTITION backoff.%I FOR VALUES IN (%s)',
                              'jobs_live_' || v_seg, v_seg);
    RETURN v_seg;
END
$$;
