-- backoff.dead_letter_sample(queue, sample, groups, pairs): the most recent
-- dead letters grouped by error signature, the second half of the web
-- UI's dead-letters summary (docs/adr/0055). The sample is the ids of the
-- most recent p_sample dead letters over every (queue, reason) pair
-- (backoff._dead_letter_pairs): one backward index-only scan of
-- jobs_dead_letters_idx per pair, merged by completed_at (the planner's
-- Merge Append reads about p_sample entries in all, not p_sample per
-- pair). The statement has one branch per pair, so it is written for the
-- pairs and run with EXECUTE. Then the sample's rows (one primary-key
-- probe each: the LIMIT keeps the planner from hashing the whole table for
-- them) are grouped by signature, each group with its newest job's error.
-- A dead letter is in the finished segment but for a moment (until
-- backoff.rotate moves one that finished in a live segment), so each row
-- is looked for there first and in the live segments only if it is not
-- there: one probe of one index per row instead of one in each of the
-- four segments, which at 10,000 rows was the statement's largest cost.
-- No JIT (docs/adr/0053). Admin only.
CREATE OR REPLACE FUNCTION backoff.dead_letter_sample(
    p_queue  text DEFAULT NULL,
    p_sample integer DEFAULT 10000,
    p_groups integer DEFAULT 200,
    p_pairs  integer DEFAULT 500
)
RETURNS TABLE (
    queue      text,
    reason     text,
    signature  text,
    count      bigint,
    first_seen timestamptz,
    last_seen  timestamptz,
    example    text,
    sampled    bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_queues  text[];
    v_reasons text[];
    v_parts   text[] := '{}';
    v_i       integer;
BEGIN
    IF p_sample IS NULL OR p_sample < 1 OR p_groups IS NULL OR p_groups < 1 OR p_pairs IS NULL OR p_pairs < 1 THEN
        RAISE EXCEPTION 'dead letter sample: sample, groups and pairs must be at least 1, got "%", "%" and "%"',
            coalesce(p_sample::text, 'NULL'), coalesce(p_groups::text, 'NULL'), coalesce(p_pairs::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT pg_catalog.array_agg(d.queue ORDER BY d.queue, d.reason), pg_catalog.array_agg(d.reason ORDER BY d.queue, d.reason)
    INTO v_queues, v_reasons
    FROM backoff._dead_letter_pairs(p_queue, p_pairs) AS d;
    IF v_queues IS NULL THEN
        RETURN;
    END IF;
    -- $1: the sample's size, $2: the groups, $3 and $4: the pairs' queues
    -- and reasons, indexed by the branch.
    FOR v_i IN 1 .. pg_catalog.cardinality(v_queues) LOOP
        IF v_reasons[v_i] IS NULL THEN
            -- The queue's NULL reasons come first in the index read
            -- backward: take the queue's first $1 entries and keep the NULL
            -- ones (a WHERE ... IS NULL lets the planner guess that most dead
            -- letters have no reason and sort them all). Merge Append then
            -- sorts this part by completed_at.
            v_parts := v_parts || pg_catalog.format(
                '(SELECT n.completed_at, n.id FROM (SELECT j.completed_at, j.id, j.dead_letter_reason'
                ' FROM backoff.jobs AS j WHERE j.status = ''dead_lettered'' AND j.queue = $3[%s]'
                ' ORDER BY j.dead_letter_reason DESC, j.completed_at DESC, j.id DESC LIMIT $1) AS n'
                ' WHERE n.dead_letter_reason IS NULL)', v_i);
        ELSE
            v_parts := v_parts || pg_catalog.format(
                '(SELECT j.completed_at, j.id FROM backoff.jobs AS j WHERE j.status = ''dead_lettered'''
                ' AND j.queue = $3[%s] AND j.dead_letter_reason = $4[%s]'
                ' ORDER BY j.completed_at DESC, j.id DESC LIMIT $1)', v_i, v_i);
        END IF;
    END LOOP;
    RETURN QUERY EXECUTE 'WITH sample AS MATERIALIZED (SELECT u.completed_at, u.id FROM ('
        || pg_catalog.array_to_string(v_parts, ' UNION ALL ')
        || ') AS u ORDER BY u.completed_at DESC, u.id DESC LIMIT $1),
groups AS (
    SELECT j.queue, j.dead_letter_reason AS reason, backoff._error_signature(j.last_error) AS sig, pg_catalog.count(*) AS n,
        min(coalesce(j.completed_at, j.created_at)) AS first_seen, max(coalesce(j.completed_at, j.created_at)) AS last_seen,
        (pg_catalog.array_agg(j.id ORDER BY s.completed_at DESC, s.id DESC))[1] AS newest
    FROM sample AS s
    CROSS JOIN LATERAL ((SELECT j.id, j.queue, j.dead_letter_reason, j.last_error, j.completed_at, j.created_at
                         FROM backoff.jobs AS j WHERE j.id = s.id AND j.segment = 0)
                        UNION ALL
                        (SELECT j.id, j.queue, j.dead_letter_reason, j.last_error, j.completed_at, j.created_at
                         FROM backoff.jobs AS j WHERE j.id = s.id AND j.segment <> 0)
                        LIMIT 1) AS j
    GROUP BY 1, 2, 3
    ORDER BY 4 DESC, 1, 2, 3
    LIMIT $2
)
SELECT g.queue, coalesce(g.reason, ''''), g.sig, g.n, g.first_seen, g.last_seen, coalesce(e.last_error, ''''),
    (SELECT pg_catalog.count(*) FROM sample)
FROM groups AS g LEFT JOIN backoff.jobs AS e ON e.id = g.newest
ORDER BY g.n DESC, g.queue, g.reason, g.sig'
        USING p_sample, p_groups, v_queues, v_reasons;
END
$$;

COMMENT ON FUNCTION backoff.dead_letter_sample(text, integer, integer, integer) IS
'The most recent p_sample dead letters (default 10000, by when they were dead-lettered) of queue p_queue (NULL: every queue) grouped by queue, reason ('''' for none) and signature (backoff.error_signature of last_error), largest group first, at most p_groups groups (default 200): count, first_seen and last_seen within the sample, example (the last error of the group''s newest job, unmasked), and sampled, how many dead letters the sample holds. Only the first p_pairs (queue, reason) pairs (default 500) are sampled, as backoff.dead_letter_reasons counts them: with that function''s counts, the groups are whole when every count is exact and their sum is at most sampled. Reads the index and p_sample rows: its cost does not grow with the dead letters beyond the sample. Admin only.
Errors: 22023 for a p_sample, p_groups or p_pairs below 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT status FROM backoff.fail(1, 1, ''SMTP 550: mailbox 1234 unknown'', p_retryable => false);
SELECT queue, reason, signature, count, sampled FROM backoff.dead_letter_sample();';
