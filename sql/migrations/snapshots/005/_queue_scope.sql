-- backoff._queue_scope(privilege): the queues the caller may act on with
-- p_privilege ('produce' or 'work'), as LIKE patterns, or NULL when the
-- caller is not scoped (docs/adr/0038-queue-scoped-privileges.md,
-- docs/adr/0058-queue-scope-fails-closed.md).
--
-- Who the caller is: inside a SECURITY DEFINER function current_user is the
-- owner, so the caller is read from session_user (the login, which only a
-- superuser can change) and from the role set with SET ROLE, if any. The
-- login's scope wins: a scoped login that does SET ROLE to an unscoped
-- group stays scoped. Otherwise the SET ROLE role's scope applies, so an
-- unscoped connection (a pooler's login, a superuser) can act as a scoped
-- role. A role is scoped when it is a member (pg_has_role MEMBER) of a role
-- that has a row in backoff.queue_grants; its scope is the union of those
-- rows. Superusers are members of every role, so they are never scoped.
--
-- A caller without any grant: with backoff.settings.require_queue_grants
-- on (a missing row counts as on), its scope is empty, i.e. no queue,
-- unless the role it acts as (SET ROLE, else the login) is a superuser or a
-- member of backoff_admin or backoff_owner, which write the tables anyway.
-- Off, it is not scoped: every queue.
--
-- Cost: a superuser login stops at the GUC read; otherwise one probe of the
-- grants and of the settings row, and with grants present one scan of the
-- grants table per identity with pg_has_role (cached membership). Private;
-- called once per call by backoff._check_queue, backoff._check_job_scope,
-- reap, complete_many and backoff.job.
CREATE OR REPLACE FUNCTION backoff._queue_scope(p_privilege text)
RETURNS text[]
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    -- The SET ROLE role, if any. The GUC is_superuser describes the
    -- caller's effective role (this role, else the login) even inside a
    -- SECURITY DEFINER function, at no cost.
    v_set_role name := NULLIF(pg_catalog.current_setting('role'), 'none');
    v_super    boolean := pg_catalog.current_setting('is_superuser') = 'on';
    v_grants   boolean;
    v_require  boolean;
    v_who      name;
    v_n        bigint;
    v_scope    text[];
BEGIN
    IF v_set_role IS NULL AND v_super THEN
        RETURN NULL;  -- a superuser login
    END IF;
    SELECT EXISTS (SELECT FROM backoff.queue_grants),
           NOT EXISTS (SELECT FROM backoff.settings AS s WHERE NOT s.require_queue_grants)
    INTO v_grants, v_require;
    IF v_grants THEN
        FOREACH v_who IN ARRAY ARRAY[session_user, v_set_role]::name[] LOOP
            CONTINUE WHEN v_who IS NULL;
            -- One scan of the (small) grants table: is v_who scoped, and to what?
            SELECT count(*), coalesce(pg_catalog.array_agg(g.pattern) FILTER (WHERE g.privilege = p_privilege), '{}')
            INTO v_n, v_scope
            FROM backoff.queue_grants AS g
            WHERE pg_catalog.pg_has_role(v_who, g.role, 'MEMBER');
            CONTINUE WHEN v_n = 0;
            -- Superusers are members of every role: never scoped. The SET ROLE
            -- role's status is v_super; the login's needs the catalog (only
            -- when it is a member of a granted role).
            CONTINUE WHEN CASE WHEN v_who = v_set_role OR v_set_role IS NULL THEN v_super
                               ELSE coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = v_who), true) END;
            RETURN v_scope;
        END LOOP;
    END IF;
    -- No grant applies to the caller.
    IF v_require AND NOT v_super THEN
        v_who := coalesce(v_set_role, session_user);
        IF NOT (pg_catalog.pg_has_role(v_who, 'backoff_admin', 'MEMBER')
                OR pg_catalog.pg_has_role(v_who, 'backoff_owner', 'MEMBER')) THEN
            RETURN '{}';
        END IF;
    END IF;
    RETURN NULL;
END
$$;
