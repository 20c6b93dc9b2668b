-- backoff.bulk_jobs(action, filter..., now): replay or cancel every job
-- that matches a filter, in one call, for operators acting on a whole
-- listing (the web UI's bulk actions). The filter is the one of the client's
-- List (queue, statuses, effective policy, dead-letter reason, text in the
-- last error, creation time range) plus an error signature
-- (backoff.error_signature). Each job goes through backoff.replay or
-- backoff.cancel in its own subtransaction: one row per matching job, in id
-- order, says whether it was done and if not why, so one job that cannot be
-- acted on does not undo the others. Admin only.
CREATE OR REPLACE FUNCTION backoff.bulk_jobs(
    p_action             text,
    p_queue              text DEFAULT NULL,
    p_statuses           text[] DEFAULT NULL,
    p_policy             text DEFAULT NULL,
    p_dead_letter_reason text DEFAULT NULL,
    p_error_contains     text DEFAULT NULL,
    p_error_signature    text DEFAULT NULL,
    p_created_from       timestamptz DEFAULT NULL,
    p_created_to         timestamptz DEFAULT NULL,
    p_limit              integer DEFAULT 10000,
    p_now                timestamptz DEFAULT now()
)
RETURNS TABLE (job_id bigint, done boolean, reason text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_action IS NULL OR p_action NOT IN ('replay', 'cancel') THEN
        RAISE EXCEPTION 'bulk action must be replay or cancel, got "%"', coalesce(p_action, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'bulk limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    FOR v_id IN
        SELECT j.id
        FROM backoff.jobs AS j
        WHERE (p_queue IS NULL OR j.queue = p_queue)
          AND (p_statuses IS NULL OR j.status = ANY (p_statuses))
          AND (p_policy IS NULL OR backoff.job_policy(j.policy, j.queue) = p_policy)
          AND (p_dead_letter_reason IS NULL OR j.dead_letter_reason = p_dead_letter_reason)
          AND (p_error_contains IS NULL OR pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower(p_error_contains)) > 0)
          AND (p_error_signature IS NULL OR backoff._error_signature(j.last_error) = p_error_signature)
          AND (p_created_from IS NULL OR j.created_at >= p_created_from)
          AND (p_created_to IS NULL OR j.created_at < p_created_to)
        ORDER BY j.id
        LIMIT p_limit
    LOOP
        job_id := v_id;
        BEGIN
            IF p_action = 'replay' THEN
                PERFORM backoff.replay(p_job_id => v_id, p_now => p_now);
            ELSE
                PERFORM backoff.cancel(p_job_id => v_id, p_reason => 'bulk cancel', p_now => p_now);
            END IF;
            done := true;
            reason := NULL;
        EXCEPTION WHEN OTHERS THEN
            done := false;
            reason := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.bulk_jobs(text, text, text[], text, text, text, text, timestamptz, timestamptz, integer, timestamptz) IS
'Replay (p_action ''replay'') or cancel (''cancel'') every job matching the filter, at most p_limit (default 10000) in id order, in one call: each through backoff.replay or backoff.cancel in its own subtransaction. Returns one row per matching job: job_id, done, and for a job left alone the reason (the error the single call raised, e.g. a pending job cannot be replayed). NULL filter arguments do not filter; p_policy is the effective policy (backoff.job_policy); p_error_contains is case-insensitive text in last_error; p_error_signature compares backoff.error_signature(last_error); created_at in [p_created_from, p_created_to). Admin only.
Errors: 22023 for an action other than replay or cancel, a p_limit below 1 or a bad p_now.
Example:
SELECT * FROM backoff.bulk_jobs(''replay'', p_queue => ''emails'', p_statuses => ''{dead_lettered}'');';
