-- backoff._job_policy_name(policy, queue): the name of the policy that
-- governs a job, the one answer to that question
-- (docs/adr/0030-one-policy-answer.md): the job's recorded policy if it
-- names a row of backoff.policies, else its queue's (backoff.queues), else
-- 'default'. A name with no row (a policy deleted after the job was
-- enqueued) falls through to the next candidate, so a job is never stuck
-- for want of a policy. enqueue records it; claim, acquire, heartbeat, fail
-- and reap read the row through _job_policy; backoff.job_policy serves it
-- to clients and operators.
--
-- Private. PL/pgSQL so that its two lookups are planned once per session
-- (docs/adr/0008-single-retry-decision.md): claim calls it once per claimed
-- row, and the first lookup (by primary key) is the usual answer. Its
-- callers are SECURITY DEFINER functions with a pinned search_path.
CREATE OR REPLACE FUNCTION backoff._job_policy_name(p_policy text, p_queue text)
RETURNS text
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    v_name text;
BEGIN
    IF p_policy IS NOT NULL THEN
        SELECT p.name INTO v_name FROM backoff.policies AS p WHERE p.name = p_policy;
        IF FOUND THEN
            RETURN v_name;
        END IF;
    END IF;
    SELECT q.policy INTO v_name FROM backoff.queues AS q WHERE q.name = p_queue;
    IF FOUND THEN
        RETURN v_name;
    END IF;
    RETURN 'default';
END
$$;
