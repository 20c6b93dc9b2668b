-- backoff.prune(older than, limit, now): delete up to p_limit finished jobs
-- (completed, dead_lettered, cancelled) whose completed_at is older than
-- p_now - p_older_than. No index serves it, on purpose: an index on
-- completed_at would be paid by every settle, and prune runs rarely. The
-- scan stops as soon as it has p_limit rows, and old rows sit early in the
-- heap (docs/adr/0009-retention-and-prune.md).
-- It also removes the queue controls' runtime state that nothing reads any
-- more (docs/adr/0054), up to p_limit rows of each table per call: the
-- failure log, breaker row and token slots of a queue whose backoff.queues
-- row is gone or whose breaker / rate was removed, the slots a smaller
-- burst no longer uses, and log rows older than a configured breaker's
-- window (fail deletes only two per append, so a queue that stops failing
-- keeps its last window). While a breaker is open, the log rows from
-- half_open_at on are kept: the next half-open claim reopens from them.
-- The queue history (backoff.queue_events: pauses and resumes) goes with
-- the same retention as the finished jobs (docs/adr/0066), and so do the
-- old ids of jobs moved here from another shard (backoff.moved_jobs).
-- These rows are not in the result (it counts jobs, so that "call it until
-- it returns less than p_limit" keeps its meaning); every delete skips
-- locked rows, so prune never waits for a claim or a fail.
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
    v_ids   bigint[];
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
    -- A finished job that an unfinished job depends on is kept, with its
    -- output: the dependent reads it (backoff.parent_outputs), and an
    -- operator may replay a failed parent that keeps a child waiting
    -- (docs/adr/0087).
    WITH d AS (
        DELETE FROM backoff.jobs AS j
        WHERE j.id = ANY (ARRAY(
            SELECT f.id
            FROM backoff.jobs AS f
            WHERE f.status IN ('completed', 'dead_lettered', 'cancelled')
              AND f.completed_at < p_now - p_older_than
              AND NOT EXISTS (SELECT FROM backoff.job_dependencies AS e
                              JOIN backoff.jobs AS c ON c.id = e.child_id
                              WHERE e.parent_id = f.id
                                AND c.status IN ('blocked', 'pending', 'running', 'retrying'))
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING j.id
    )
    SELECT array_agg(d.id) INTO v_ids FROM d;
    v_count := coalesce(cardinality(v_ids), 0);
    -- What the deleted jobs kept beside their rows: outputs, progress,
    -- their edges either way (a deleted parent's children are finished,
    -- or it would have been kept) and a stale counter.
    IF v_count > 0 THEN
        DELETE FROM backoff.job_outputs AS o WHERE o.job_id = ANY (v_ids);
        DELETE FROM backoff.job_progress AS g WHERE g.job_id = ANY (v_ids);
        DELETE FROM backoff.job_blockers AS b WHERE b.job_id = ANY (v_ids);
        DELETE FROM backoff.job_dependencies AS e WHERE e.child_id = ANY (v_ids);
        DELETE FROM backoff.job_dependencies AS e WHERE e.parent_id = ANY (v_ids);
        -- The old ids of deleted jobs that were moved here from another
        -- shard (docs/adr/0092), unless their queue's move here is still
        -- under way: the mover reads them to copy each job once.
        DELETE FROM backoff.moved_jobs AS m
        WHERE m.job_id = ANY (v_ids)
          AND NOT EXISTS (SELECT FROM backoff.queue_moves AS q WHERE q.queue = m.queue AND q.direction = 'in');
    END IF;

    -- The failure log: a queue without a breaker (or without a row), and,
    -- with one, rows older than its window except those an open breaker's
    -- next half-open claim reopens from (failed_at >= half_open_at).
    DELETE FROM backoff.queue_failures AS f
    WHERE f.ctid = ANY (ARRAY(
        SELECT o.ctid
        FROM backoff.queue_failures AS o
        LEFT JOIN backoff.queues AS q ON q.name = o.queue
        LEFT JOIN backoff.queue_breakers AS b ON b.queue = o.queue
        WHERE q.breaker_failures IS NULL
           OR (o.failed_at <= p_now - q.breaker_window
               AND (b.opened_at IS NULL OR o.failed_at < b.half_open_at))
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED));
    -- The breaker row of a queue without a breaker (no row = closed).
    DELETE FROM backoff.queue_breakers AS b
    WHERE b.queue = ANY (ARRAY(
        SELECT s.queue
        FROM backoff.queue_breakers AS s
        WHERE NOT EXISTS (SELECT FROM backoff.queues AS q
                          WHERE q.name = s.queue AND q.breaker_failures IS NOT NULL)
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED));
    -- Token slots of a queue without a rate, and the slots numbered
    -- least(16, burst) or more, which claim ignores (docs/adr/0045).
    DELETE FROM backoff.queue_tokens AS t
    WHERE (t.queue, t.slot) IN (
        SELECT s.queue, s.slot
        FROM backoff.queue_tokens AS s
        LEFT JOIN backoff.queues AS q ON q.name = s.queue
        WHERE q.rate IS NULL
           OR s.slot >= least(16, backoff._queue_burst(q.rate, q.burst))
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED);
    -- The queue history, with the finished jobs' retention.
    DELETE FROM backoff.queue_events AS e
    WHERE e.id = ANY (ARRAY(
        SELECT o.id
        FROM backoff.queue_events AS o
        WHERE o.at < p_now - p_older_than
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED));
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.prune(interval, integer, timestamptz) IS
'Delete up to p_limit finished jobs (completed, dead_lettered, cancelled) whose completed_at is before p_now - p_older_than; returns how many. Dead letters are evidence: choose p_older_than long enough to read them. A finished job that a blocked, pending, running or retrying job depends on is kept until that job finishes; a deleted job''s output, progress and dependency edges go with it, and so does its old id in backoff.moved_jobs when it was moved here from another shard (kept while a move of its queue to this shard is under way). Call it repeatedly until it returns less than p_limit. Safe to run concurrently (FOR UPDATE SKIP LOCKED).
It also deletes, up to p_limit rows of each table per call and not counted in the result, the queue controls'' state that nothing reads any more: rows of backoff.queue_failures, backoff.queue_breakers and backoff.queue_tokens of a queue that has no backoff.queues row or no breaker (failures, breakers) or no rate (tokens); token slots numbered least(16, burst) or more; failure-log rows at or before p_now - breaker_window of a queue with a breaker, except, while its breaker is open, those at or after half_open_at; and the queue history (backoff.queue_events) from before p_now - p_older_than.
Errors: 22023 for a NULL or negative p_older_than, a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1);
SELECT backoff.prune(''7 days'', p_now => now() + interval ''8 days'') AS deleted;';
