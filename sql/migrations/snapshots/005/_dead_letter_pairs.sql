-- backoff._dead_letter_pairs(queue, limit): the first p_limit (queue,
-- reason) pairs of the dead letters, in (queue, reason) order, by a loose
-- scan of jobs_dead_letters_idx: one probe per pair, not a read of every
-- dead letter (reason may be NULL: the next pair is a greater reason, else
-- the queue's NULL reason, else the next queue). The scan stops at the
-- limit, as a recursive query is evaluated only as far as it is read.
-- Every probe orders by the index's columns: with a bare LIMIT the planner
-- may take a heap or sequential scan (PostgreSQL 14-18 did, estimating the
-- reason's NULLs from the whole table), and the NULL reason's probes order
-- by the reason too (IS NULL is no equality for the planner's orderings).
-- Written with the queue condition only when there is a queue (EXECUTE),
-- so that the probes of one queue start at that queue.
CREATE OR REPLACE FUNCTION backoff._dead_letter_pairs(p_queue text, p_limit bigint)
RETURNS TABLE (queue text, reason text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE 'WITH RECURSIVE pairs (queue, reason) AS (
    (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
     WHERE j.status = ''dead_lettered''' || CASE WHEN p_queue IS NOT NULL THEN ' AND j.queue = $1' ELSE '' END || '
     ORDER BY j.queue, j.dead_letter_reason LIMIT 1)
    UNION ALL
    SELECT n.queue, n.reason FROM pairs AS p CROSS JOIN LATERAL (
        SELECT u.queue, u.reason FROM (
            (SELECT j.queue, j.dead_letter_reason AS reason FROM backoff.jobs AS j
             WHERE j.status = ''dead_lettered'' AND p.reason IS NOT NULL
               AND j.queue = p.queue AND j.dead_letter_reason > p.reason
             ORDER BY j.dead_letter_reason LIMIT 1)
            UNION ALL
            (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
             WHERE j.status = ''dead_lettered'' AND p.reason IS NOT NULL
               AND j.queue = p.queue AND j.dead_letter_reason IS NULL
             ORDER BY j.dead_letter_reason LIMIT 1)' || CASE WHEN p_queue IS NULL THEN '
            UNION ALL
            (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
             WHERE j.status = ''dead_lettered'' AND j.queue > p.queue
             ORDER BY j.queue, j.dead_letter_reason LIMIT 1)' ELSE '' END || ') AS u
        ORDER BY u.queue, u.reason LIMIT 1) AS n
)
SELECT f.queue, f.reason FROM pairs AS f WHERE f.queue IS NOT NULL LIMIT $2'
    USING p_queue, p_limit;
END
$$;
