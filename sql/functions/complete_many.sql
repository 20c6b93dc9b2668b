-- backoff.complete_many(job ids, attempts, now): complete a batch in one
-- UPDATE joined to the unnested arrays. Fenced per entry: a job not running
-- the given attempt is left alone and its id not returned.
--
-- Plan notes: jobs are found with id = ANY(p_job_ids) (the primary key) and
-- joined to the arrays by hash, never by a nested loop. Statistics taken
-- while nothing runs say status = 'running' matches about one row, so
-- without this the planner nests a scan of every running row inside a scan
-- of the arrays: running x batch comparisons, which took 4.9 s for 1,000
-- ids among 30,000 running jobs and made four Workers on one pool slower
-- than one (docs/adr/0026-worker-runner.md).
CREATE OR REPLACE FUNCTION backoff.complete_many(
    p_job_ids  bigint[],
    p_attempts integer[],
    p_now      timestamptz DEFAULT now()
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_nestloop = off
AS $$
BEGIN
    p_now := backoff._now(p_now);
    IF p_job_ids IS NULL OR p_attempts IS NULL
       OR cardinality(p_job_ids) <> cardinality(p_attempts) THEN
        RAISE EXCEPTION 'complete_many: job ids and attempts must be arrays of equal length, got "%" and "%"',
            coalesce(cardinality(p_job_ids)::text, 'NULL'), coalesce(cardinality(p_attempts)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    UPDATE backoff.jobs AS j
    SET status = 'completed',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL
    FROM unnest(p_job_ids, p_attempts) AS t(id, attempt)
    WHERE j.id = ANY (p_job_ids)
      AND j.id = t.id
      AND j.attempts = t.attempt
      AND j.status = 'running'
    RETURNING j.id;
END
$$;

COMMENT ON FUNCTION backoff.complete_many(bigint[], integer[], timestamptz) IS
'Complete a batch in one statement: p_job_ids[i] is completed if it is running attempt p_attempts[i] (completed_at = p_now, lease and locked_by cleared). Returns the ids it completed; an entry whose fencing fails (stale attempt, finished, unknown) is left untouched and not returned. The fast path for workers that claim in batches.
Errors: 22023 for NULL arrays, arrays of different lengths, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 3);
SELECT * FROM backoff.complete_many(ARRAY[1, 2, 3], ARRAY[1, 1, 2]);  -- job 3 ran attempt 1, not 2';
