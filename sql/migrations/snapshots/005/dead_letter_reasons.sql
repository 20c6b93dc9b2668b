-- backoff.dead_letter_reasons(queue, count limit, pairs): the dead letters
-- counted per queue and reason, the first half of the web UI's
-- dead-letters summary (docs/adr/0055): the pairs by a loose index scan
-- (backoff._dead_letter_pairs), then for each pair its count up to the
-- limit and its first and last completed_at, all index-only reads of
-- jobs_dead_letters_idx. Its cost grows with the pairs and the counts up
-- to their limit, not with the dead letters beyond them. No JIT: many
-- small index probes whose estimated cost passes jit_above_cost (compiled,
-- this read took three times as long at 1,000,000 jobs, and a server
-- whose llvmjit cannot load fails it; docs/adr/0053). A custom plan at
-- every call: the count's bound is then a known LIMIT, for which the
-- planner reads the index in order; as a parameter of a generic plan it
-- guessed a few rows and sorted a bitmap scan's. Admin only.
CREATE OR REPLACE FUNCTION backoff.dead_letter_reasons(
    p_queue       text DEFAULT NULL,
    p_count_limit integer DEFAULT 100000,
    p_pairs       integer DEFAULT 500
)
RETURNS TABLE (
    queue       text,
    reason      text,
    count       bigint,
    count_exact boolean,
    first_seen  timestamptz,
    last_seen   timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    IF p_count_limit IS NULL OR p_count_limit < 1 OR p_pairs IS NULL OR p_pairs < 1 THEN
        RAISE EXCEPTION 'dead letter reasons: count limit and pairs must be at least 1, got "%" and "%"',
            coalesce(p_count_limit::text, 'NULL'), coalesce(p_pairs::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.queue, c.reason, least(c.n, p_count_limit::bigint), c.n <= p_count_limit, c.first_seen, c.last_seen
    FROM (
        SELECT p.queue, p.reason,
            (SELECT pg_catalog.count(*) FROM (
                (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                   AND j.queue = p.queue AND j.dead_letter_reason = p.reason
                   ORDER BY j.completed_at LIMIT p_count_limit::bigint + 1)
                UNION ALL
                (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                   AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL
                   ORDER BY j.dead_letter_reason, j.completed_at LIMIT p_count_limit::bigint + 1)) AS m) AS n,
            coalesce((SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND j.dead_letter_reason = p.reason AND j.completed_at IS NOT NULL
                        ORDER BY j.completed_at LIMIT 1),
                     (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL AND j.completed_at IS NOT NULL
                        ORDER BY j.dead_letter_reason, j.completed_at LIMIT 1)) AS first_seen,
            coalesce((SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND j.dead_letter_reason = p.reason AND j.completed_at IS NOT NULL
                        ORDER BY j.completed_at DESC LIMIT 1),
                     (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL AND j.completed_at IS NOT NULL
                        ORDER BY j.dead_letter_reason DESC, j.completed_at DESC LIMIT 1)) AS last_seen
        FROM backoff._dead_letter_pairs(p_queue, p_pairs) AS p
        -- Once per pair: without the fence the count's subquery is copied
        -- into each expression that reads it, and runs twice.
        OFFSET 0
    ) AS c
    ORDER BY c.queue, c.reason;
END
$$;

COMMENT ON FUNCTION backoff.dead_letter_reasons(text, integer, integer) IS
'The dead letters of queue p_queue (NULL: every queue) counted per queue and reason (NULL: dead-lettered without one, by hand), by queue and reason: count, exact up to p_count_limit (default 100000; above it count is p_count_limit and count_exact false), and first_seen and last_seen, when they were dead-lettered (exact whatever the count; NULL when none has a completion time). At most p_pairs pairs (default 500), the first in (queue, reason) order: ask for one more than shown to learn whether there are more. Index reads only: its cost grows with the pairs and the counts up to their limit, not with the dead letters beyond. Admin only.
Errors: 22023 for a p_count_limit or p_pairs below 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT status FROM backoff.fail(1, 1, ''SMTP 550: mailbox unknown'', p_retryable => false);
SELECT queue, reason, count, count_exact FROM backoff.dead_letter_reasons();';
