-- backoff.job_policy(policy, queue): the name of the policy that governs a
-- job, for clients and operators; the answer is backoff._job_policy_name's
-- (docs/adr/0030-one-policy-answer.md).
CREATE OR REPLACE FUNCTION backoff.job_policy(p_policy text, p_queue text)
RETURNS text
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._job_policy_name(p_policy, p_queue)
$$;

COMMENT ON FUNCTION backoff.job_policy(text, text) IS
'The name of the policy that governs a job whose recorded policy is p_policy (backoff.jobs.policy) in queue p_queue: p_policy if it names a row of backoff.policies, else the queue''s policy (backoff.queues), else ''default''. It is the same answer every function uses: enqueue records it; claim, acquire, heartbeat, fail and reap take that policy''s lease and retry curve; backoffctl and the Go client show it.
Example:
SELECT backoff.job_policy(NULL, ''emails'');
SELECT id, backoff.job_policy(policy, queue) FROM backoff.jobs;';
