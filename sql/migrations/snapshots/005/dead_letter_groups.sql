-- backoff.dead_letter_groups(queue, limit): every dead letter grouped by
-- queue, reason and error signature (backoff.error_signature of the last
-- error), largest group first. It reads every dead letter of the queue,
-- so its cost grows with them: backoff.dead_letter_reasons and
-- backoff.dead_letter_sample are the bounded summary a page that refreshes
-- shows (docs/adr/0055). A custom plan at every call, so that a queue
-- reads only its part of jobs_dead_letters_idx. Admin only.
CREATE OR REPLACE FUNCTION backoff.dead_letter_groups(p_queue text DEFAULT NULL, p_limit integer DEFAULT 200)
RETURNS TABLE (
    queue      text,
    reason     text,
    signature  text,
    count      bigint,
    first_seen timestamptz,
    last_seen  timestamptz,
    example    text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'dead letter groups: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT j.queue, coalesce(j.dead_letter_reason, ''), backoff._error_signature(j.last_error) AS sig,
           pg_catalog.count(*), min(coalesce(j.completed_at, j.created_at)), max(coalesce(j.completed_at, j.created_at)),
           coalesce((pg_catalog.array_agg(j.last_error ORDER BY j.id DESC))[1], '')
    FROM backoff.jobs AS j
    WHERE j.status = 'dead_lettered' AND (p_queue IS NULL OR j.queue = p_queue)
    GROUP BY 1, 2, 3
    ORDER BY 4 DESC, 1, 2, 3
    LIMIT p_limit;
END
$$;

COMMENT ON FUNCTION backoff.dead_letter_groups(text, integer) IS
'The dead letters of queue p_queue (NULL: every queue) grouped by queue, reason ('''' for none) and signature (backoff.error_signature of last_error), largest group first, at most p_limit groups (default 200): count, first_seen and last_seen (when they were dead-lettered) and example, the last error of the group''s newest job, unmasked. Reads every dead letter: backoff.dead_letter_sample is the bounded summary. Admin only.
Errors: 22023 for a p_limit below 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT status FROM backoff.fail(1, 1, ''SMTP 550: mailbox 1234 unknown'', p_retryable => false);
SELECT queue, reason, signature, count FROM backoff.dead_letter_groups(''emails'');';
