-- backoff._queue_scope(privilege): the queues the caller may act on with
-- p_privilege ('produce' or 'work'), as LIKE patterns, or NULL when the
-- caller is not scoped (DESIGN §11.3, docs/adr/0038-queue-scoped-privileges.md).
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
-- Cost: with no grants at all, one probe of an empty table. Private; called
-- once per call by backoff._check_queue and reap.
CREATE OR REPLACE FUNCTION backoff._queue_scope(p_privilege text)
RETURNS text[]
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_who name;
BEGIN
    IF NOT EXISTS (SELECT FROM backoff.queue_grants) THEN
        RETURN NULL;
    END IF;
    FOREACH v_who IN ARRAY ARRAY[session_user, NULLIF(pg_catalog.current_setting('role'), 'none')]::name[] LOOP
        CONTINUE WHEN v_who IS NULL
            OR coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = v_who), true);
        IF EXISTS (SELECT FROM backoff.queue_grants AS g WHERE pg_catalog.pg_has_role(v_who, g.role, 'MEMBER')) THEN
            RETURN ARRAY(
                SELECT g.pattern FROM backoff.queue_grants AS g
                WHERE g.privilege = p_privilege AND pg_catalog.pg_has_role(v_who, g.role, 'MEMBER'));
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
