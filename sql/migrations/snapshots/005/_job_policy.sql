-- backoff._job_policy(policy, queue): the row of the policy that governs a
-- job, as backoff._job_policy_name names it; with no such row (no 'default' row
-- either) it raises 22023. Private; PL/pgSQL so
-- that its plans are cached (docs/adr/0008-single-retry-decision.md).
CREATE OR REPLACE FUNCTION backoff._job_policy(p_policy text, p_queue text)
RETURNS backoff.policies
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_policy backoff.policies;
    -- Named once: in the WHERE clause the call would run for every row a
    -- sequential scan of backoff.policies reads (the plan for a small,
    -- analyzed table), four calls per fail or reap batch with the shipped
    -- profiles (docs/adr/0052).
    v_name   text := backoff._job_policy_name(p_policy, p_queue);
BEGIN
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = v_name;
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    RAISE EXCEPTION 'unknown policy "%" and no "default" policy', coalesce(p_policy, 'NULL')
        USING ERRCODE = 'invalid_parameter_value';
END
$$;
