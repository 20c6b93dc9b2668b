-- backoff._notify_awaiters(job ids): the jobs just finished (completed,
-- dead-lettered or cancelled) that someone awaits (backoff.await_job):
-- their registrations are deleted and channel backoff_finished is notified
-- with each one's id. The calls that finish a job run it only when a
-- probe of backoff.job_awaiters, empty unless the feature is used, finds
-- one of theirs: a NOTIFY serializes the commits of the transactions that
-- send one, so none is sent for a job nobody awaits.
CREATE OR REPLACE FUNCTION backoff._notify_awaiters(p_ids bigint[])
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    WITH d AS (
        DELETE FROM backoff.job_awaiters AS a
        WHERE a.job_id = ANY (p_ids)
        RETURNING a.job_id
    )
    SELECT pg_catalog.pg_notify('backoff_finished', d.job_id::text)
    FROM (SELECT DISTINCT d.job_id FROM d) AS d;
$$;
