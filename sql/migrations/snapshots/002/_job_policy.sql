-- backoff._job_policy(policy, queue): the policy row that governs a job:
-- the job's own policy, else its queue's (backoff.queues), else 'default'.
-- A name with no row (a policy deleted after the job was enqueued) falls
-- through to the next candidate, so a job is never stuck for want of a
-- policy; with no 'default' row either it raises 22023. Private; PL/pgSQL so
-- that its plans are cached (docs/adr/0008-single-retry-decision.md).
CREATE OR REPLACE FUNCTION backoff._job_policy(p_policy text, p_queue text)
RETURNS backoff.policies
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    IF p_policy IS NOT NULL THEN
        SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
        IF FOUND THEN
            RETURN v_policy;
        END IF;
    END IF;
    SELECT p.* INTO v_policy
    FROM backoff.queues AS q
    JOIN backoff.policies AS p ON p.name = q.policy
    WHERE q.name = p_queue;
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = 'default';
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    RAISE EXCEPTION 'unknown policy "%" and no "default" policy', coalesce(p_policy, 'NULL')
        USING ERRCODE = 'invalid_parameter_value';
END
$$;
