-- Least privilege (docs/adr/0017-least-privilege-and-security-definer.md).
--
-- Four NOLOGIN roles, created when they do not exist yet:
--   backoff_owner    owns the tables and functions; not a superuser. The
--                    public functions are SECURITY DEFINER, so they run as
--                    this role whoever calls them.
--   backoff_producer enqueue.
--   backoff_worker   claim, acquire, complete, complete_many, fail,
--                    heartbeat, snooze, reap; read-only SELECT on the tables.
--   backoff_admin    every public function, and read/write access to the
--                    tables (backoffctl config apply writes policies and
--                    queues; dlq replay --all locks dead letters).
-- Applications log in as their own roles and are granted one of the three
-- (GRANT backoff_worker TO app_worker). Nobody but the owner and admin can
-- write a table; producers and workers change jobs only through functions.
--
-- Roles belong to the whole server, not to one database: several databases
-- (or many test databases) share them. So creating them tolerates a
-- concurrent migration in another database doing the same, and the down
-- section never drops a role (see there).
--
-- The migrating user: a superuser needs nothing more. Otherwise it needs
-- CREATEROLE the first time (or a DBA creates the four roles beforehand),
-- and membership in backoff_owner, which this migration grants to it when
-- it created the role (ALTER ... OWNER TO requires it).

DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['backoff_owner', 'backoff_producer', 'backoff_worker', 'backoff_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS', v_role);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                -- Another database's migration created it at the same moment.
                NULL;
            END;
        END IF;
    END LOOP;
    -- A non-superuser installer must be a member of the owner role to hand
    -- objects to it.
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
       AND NOT pg_catalog.pg_has_role(current_user, 'backoff_owner', 'MEMBER') THEN
        EXECUTE pg_catalog.format('GRANT backoff_owner TO %I', current_user);
    END IF;
END
$$;

-- The schema: usage for every role; the owner may create (later migrations
-- can SET ROLE backoff_owner, so that what they create is its own).
REVOKE ALL ON SCHEMA backoff FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA backoff TO backoff_owner;
GRANT USAGE ON SCHEMA backoff TO backoff_producer, backoff_worker, backoff_admin;

-- Tables (the identity sequence of jobs follows its table).
ALTER TABLE backoff.jobs OWNER TO backoff_owner;
ALTER TABLE backoff.policies OWNER TO backoff_owner;
ALTER TABLE backoff.queues OWNER TO backoff_owner;
REVOKE ALL ON backoff.jobs, backoff.policies, backoff.queues FROM PUBLIC;
GRANT SELECT ON backoff.jobs, backoff.policies, backoff.queues TO backoff_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON backoff.jobs, backoff.policies, backoff.queues TO backoff_admin;
-- tern's version table stays the installer's; schema_version() reads it as
-- the owner.
GRANT SELECT ON backoff.schema_migrations TO backoff_owner, backoff_admin;

-- Functions: owned by backoff_owner, executable by nobody else unless
-- granted below. Future functions created by the owner are not executable
-- by PUBLIC either. (Per-schema default privileges can only add to the
-- global ones, so the revoke is global for the owner role, in this database.)
ALTER DEFAULT PRIVILEGES FOR ROLE backoff_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

DO $$
DECLARE
    v_fn   record;
    v_role text;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure AS sig, p.proname::text AS name
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::regnamespace
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO backoff_owner', v_fn.sig);
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn.sig);
        -- By name, so that every overload (and a parameter added at the
        -- end in a later release) is covered.
        FOREACH v_role IN ARRAY ARRAY['backoff_producer', 'backoff_worker', 'backoff_admin'] LOOP
            IF v_fn.name = 'schema_version'
               OR (v_role = 'backoff_producer' AND v_fn.name IN ('enqueue'))
               OR (v_role = 'backoff_worker' AND v_fn.name IN (
                       'claim', 'acquire', 'complete', 'complete_many', 'fail', 'heartbeat', 'snooze', 'reap',
                       'retry_delay', 'compute_delay', 'schedule', 'calculate_step_next_retry_time'))
               OR (v_role = 'backoff_admin' AND v_fn.name NOT LIKE '\_%') THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn.sig, v_role);
            END IF;
        END LOOP;
    END LOOP;
END
$$;

---- create above / drop below ----

-- Back to what migration 002 left: objects owned by the migrating user,
-- the schema without USAGE for PUBLIC (as the migrator created it) -- but
-- the functions NOT executable by PUBLIC: they are SECURITY DEFINER, and
-- once owned by the migrating (often super)user, EXECUTE for PUBLIC would
-- let any role that is ever given USAGE on the schema act as that user
-- (docs/adr/0036-install-hygiene.md). Only their owner may run them at version 2. The roles are NOT dropped: they belong to the
-- server and other databases may use them (and login roles may be members).
-- Once no database uses them, drop them by hand:
--   DROP ROLE backoff_producer, backoff_worker, backoff_admin, backoff_owner;
-- (DROP ROLE refuses while any database still has objects or privileges of
-- a role.)
ALTER DEFAULT PRIVILEGES FOR ROLE backoff_owner GRANT EXECUTE ON FUNCTIONS TO PUBLIC;

DO $$
DECLARE
    v_fn pg_catalog.regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM backoff_producer, backoff_worker, backoff_admin', v_fn);
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn);
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', v_fn, current_user);
    END LOOP;
END
$$;

REVOKE ALL ON backoff.schema_migrations FROM backoff_owner, backoff_admin;
REVOKE ALL ON backoff.jobs, backoff.policies, backoff.queues FROM backoff_worker, backoff_admin;
DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER TABLE backoff.jobs OWNER TO %I', current_user);
    EXECUTE pg_catalog.format('ALTER TABLE backoff.policies OWNER TO %I', current_user);
    EXECUTE pg_catalog.format('ALTER TABLE backoff.queues OWNER TO %I', current_user);
END
$$;
REVOKE ALL ON SCHEMA backoff FROM backoff_owner, backoff_producer, backoff_worker, backoff_admin;
