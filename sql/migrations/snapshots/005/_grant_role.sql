-- backoff._grant_role(caller, role, privilege): the role of a queue grant,
-- checked with the privilege by one rule for grant_queue and revoke_queue:
-- p_role must be a role and p_privilege 'produce' or 'work'; otherwise
-- 22023 naming the value, prefixed with the caller's name. Private.
CREATE OR REPLACE FUNCTION backoff._grant_role(p_caller text, p_role text, p_privilege text)
RETURNS oid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role oid;
BEGIN
    SELECT r.oid INTO v_role FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: unknown role "%"', p_caller, coalesce(p_role, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_privilege IS NULL OR p_privilege NOT IN ('produce', 'work') THEN
        RAISE EXCEPTION '%: privilege must be "produce" or "work", got "%"', p_caller, coalesce(p_privilege, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v_role;
END
$$;
