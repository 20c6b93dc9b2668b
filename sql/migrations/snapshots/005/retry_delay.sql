-- backoff.retry_delay(policy, attempt, seed): the delay before the retry
-- that follows failed attempt p_attempt (1-based) under a named policy,
-- jitter included, deterministic from p_seed (normally the job id).
CREATE OR REPLACE FUNCTION backoff.retry_delay(
    p_policy  text,
    p_attempt integer,
    p_seed    bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    SELECT * INTO v_policy FROM backoff.policies WHERE name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN backoff._policy_delay_us(v_policy, p_attempt, coalesce(p_seed, 0)) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.retry_delay(text, integer, bigint) IS
'Delay before the retry that follows failed attempt p_attempt (1-based) under the named policy, jitter included and deterministic from p_seed (normally the job id). Raises 22023 for an unknown policy or an attempt below 1.
Example: SELECT backoff.retry_delay(''moderate'', 3, 42);';
