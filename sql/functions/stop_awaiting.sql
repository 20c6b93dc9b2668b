-- backoff.stop_awaiting(job id, awaiter): end p_awaiter's registration
-- for job p_job_id (backoff.await_job), as an awaiter that gave up does.
CREATE OR REPLACE FUNCTION backoff.stop_awaiting(
    p_job_id  bigint,
    p_awaiter text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_awaiter := backoff._check_name('awaiter', p_awaiter);
    DELETE FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id AND a.awaiter = p_awaiter;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.stop_awaiting(bigint, text) IS
'End p_awaiter''s registration for job p_job_id (see backoff.await_job), as an awaiter whose deadline passed does. The finishing call deletes the registrations of the job it finishes, and await_job those expired. Returns whether a registration existed. Workers, producers and admins.
Errors: 22023 an awaiter that is not 1 to 128 bytes without control characters.
Example:
SELECT backoff.enqueue(''thumbnails'');
SELECT backoff.await_job(1, ''web-1'');
SELECT backoff.stop_awaiting(1, ''web-1'');  -- true';
