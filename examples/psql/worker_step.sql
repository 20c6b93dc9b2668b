-- One turn of the psql worker loop (see worker.sql): claim one job with a
-- 30 s lease, "handle" it, settle it with the attempt it was claimed with
-- (the fencing token), and go round again while there was a job.
-- An aggregate always returns one row, which \gset needs even when the
-- queue is empty.
SELECT count(*) > 0 AS job_found, max(id) AS job_id, max(attempts) AS job_attempts,
       coalesce(bool_or((payload->>'fail_once')::boolean AND attempts = 1), false) AS job_fails
FROM backoff.claim('psql-demo', 'psql-worker', 1, interval '30 seconds') \gset
\if :job_found
  \if :job_fails
    SELECT status FROM backoff.fail(:job_id, :job_attempts, 'downstream timed out', p_retry_in => interval '0') \gset
    \echo job :job_id attempt :job_attempts failed, now :status
  \else
    SELECT status FROM backoff.complete(:job_id, :job_attempts) \gset
    \echo job :job_id attempt :job_attempts :status
  \endif
  \ir worker_step.sql
\endif
