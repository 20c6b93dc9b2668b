-- backoff.complete(job id, attempt, now): mark the running attempt p_attempt
-- of a job completed. One guarded UPDATE; the error path reads the row only
-- when it matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.complete(
    p_job_id  bigint,
    p_attempt integer,
    p_now     timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    p_now := backoff._now(p_now);
    UPDATE backoff.jobs AS j
    SET status = 'completed',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF NOT FOUND THEN
        PERFORM backoff._raise_fencing_error('complete', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.complete(bigint, integer, timestamptz) IS
'Mark job p_job_id completed, if it is running attempt p_attempt (the attempts value claim returned: the fencing token, which no other claim of the job ever has, across snooze, cancel and replay too). Sets completed_at = p_now, clears lease_until and locked_by; returns the job.
Errors: BK002 the job is live but not running this attempt (its lease was reaped, or another attempt holds it); BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id or attempt, an attempt < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts FROM backoff.complete(1, 1);';
