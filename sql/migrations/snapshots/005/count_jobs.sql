-- backoff.count_jobs(filters, limit): how many jobs the operator's filters
-- match, up to a bound: the number a confirmation of a bulk action names
-- (backoff.bulk_jobs takes the same filters). Written for the filters
-- that are set and run with EXECUTE, as backoff.list_jobs is, so that the
-- partial indexes serve them. No JIT (docs/adr/0053). Admin only.
CREATE OR REPLACE FUNCTION backoff.count_jobs(
    p_queue              text DEFAULT NULL,
    p_statuses           text[] DEFAULT NULL,
    p_policy             text DEFAULT NULL,
    p_dead_letter_reason text DEFAULT NULL,
    p_error_contains     text DEFAULT NULL,
    p_error_signature    text DEFAULT NULL,
    p_created_from       timestamptz DEFAULT NULL,
    p_created_to         timestamptz DEFAULT NULL,
    p_finished_from      timestamptz DEFAULT NULL,
    p_finished_to        timestamptz DEFAULT NULL,
    p_schedule           text DEFAULT NULL,
    p_limit              bigint DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_cond text;
    v_n    bigint;
BEGIN
    IF p_limit < 0 THEN
        RAISE EXCEPTION 'count jobs: limit must be 0 or more, got "%"', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cond := backoff._job_filter(p_queue, p_statuses, p_policy, p_dead_letter_reason,
                                  p_created_from, p_created_to, p_finished_from, p_finished_to, p_schedule);
    IF p_error_contains IS NOT NULL THEN
        v_cond := v_cond || ' AND pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower($9)) > 0';
    END IF;
    IF p_error_signature IS NOT NULL THEN
        v_cond := v_cond || ' AND backoff._error_signature(j.last_error) = $10';
    END IF;
    EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM backoff.jobs AS j WHERE ' || v_cond || ' LIMIT $11) AS m'
        INTO v_n
        USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
              p_finished_from, p_finished_to, p_schedule, p_error_contains, p_error_signature, nullif(p_limit, 0);
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION backoff.count_jobs(text, text[], text, text, text, text, timestamptz, timestamptz, timestamptz, timestamptz, text, bigint) IS
'How many jobs match the filter, counting at most p_limit (NULL or 0: no bound): the filters of backoff.list_jobs (NULL filters do not filter; p_schedule among them) and p_error_signature, which compares backoff.error_signature(last_error) (no index: it reads each job the other filters select). The number a confirmation of backoff.bulk_jobs names. Admin only.
Errors: 22023 for an unknown status or a negative p_limit.
Example:
SELECT backoff.enqueue(''emails'');
SELECT backoff.count_jobs(p_queue => ''emails'', p_statuses => ''{pending, retrying}'', p_limit => 1000);';
