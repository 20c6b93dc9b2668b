-- Round 2: the schema changes of DESIGN §11, then the working copy of every
-- function (snapshot "unreleased", sql/functions), then their privileges.
-- Round 1's functions stay frozen in snapshots/002 (migration 002), so this
-- is the only migration that installs "unreleased" (docs/adr/0003).
--
-- Each section below belongs to one change; its down counterpart is in the
-- same order, reversed, after the marker.

-- == Schema changes (one section per change; added by the round-2 work) ==

-- -- Queue-scoped privileges (DESIGN §11.3, docs/adr/0038-queue-scoped-privileges.md) --
-- One row per grant of backoff.grant_queue: role (an oid, so that a renamed
-- role keeps its grants; a dropped role's rows match nobody), the queue or
-- prefix as written ('mail.*'), the privilege, and the LIKE pattern the
-- functions match queue names against. Written only through grant_queue
-- and revoke_queue (definer functions); backoff_admin may read it and
-- delete rows of dropped roles.
CREATE TABLE backoff.queue_grants (
    role      oid NOT NULL,
    queue     text NOT NULL,
    privilege text NOT NULL,
    pattern   text NOT NULL,
    CONSTRAINT queue_grants_pkey PRIMARY KEY (role, queue, privilege),
    CONSTRAINT queue_grants_privilege CHECK (privilege IN ('produce', 'work'))
);
ALTER TABLE backoff.queue_grants OWNER TO backoff_owner;
REVOKE ALL ON backoff.queue_grants FROM PUBLIC;
GRANT SELECT, DELETE ON backoff.queue_grants TO backoff_admin;

-- (end of schema changes)

{{ install_snapshot "unreleased" }}

-- Privileges of the functions: the rule of migration 003 (docs/adr/0017),
-- with round 2's function names. Owner backoff_owner, nothing for PUBLIC,
-- EXECUTE granted by name so that every overload is covered.
DO $$
DECLARE
    v_fn   record;
    v_role text;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure AS sig, p.proname::text AS name
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO backoff_owner', v_fn.sig);
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn.sig);
        FOREACH v_role IN ARRAY ARRAY['backoff_producer', 'backoff_worker', 'backoff_admin'] LOOP
            IF v_fn.name = 'schema_version'
               OR (v_role = 'backoff_producer' AND v_fn.name IN ('enqueue'))
               OR (v_role = 'backoff_worker' AND v_fn.name IN (
                       'claim', 'acquire', 'complete', 'complete_many', 'fail', 'heartbeat', 'snooze', 'reap',
                       'retry_delay', 'compute_delay', 'schedule', 'calculate_step_next_retry_time',
                       -- private, for the row-level security policy of backoff.jobs
                       '_visible_queues'))
               OR (v_role = 'backoff_admin' AND v_fn.name NOT LIKE '\_%') THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn.sig, v_role);
            END IF;
        END LOOP;
    END LOOP;
END
$$;

-- -- Queue-scoped privileges: who reads which jobs (after the functions, which the policy calls) --
-- Migration 003 let backoff_worker SELECT every job, so any worker read every
-- queue's payloads. Workers keep SELECT (the client's Get, operators'
-- queries), filtered by row-level security to the jobs of their 'work'
-- scope; unscoped workers still see every job. backoff_admin sees and
-- writes everything; the owner (every function, all SECURITY DEFINER) and
-- its members bypass the policies as the table's owner; so do superusers.
-- Any other role granted SELECT by hand sees no row.
ALTER TABLE backoff.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_admin ON backoff.jobs TO backoff_admin USING (true) WITH CHECK (true);
CREATE POLICY jobs_worker_read ON backoff.jobs FOR SELECT TO backoff_worker
    USING ((SELECT backoff._visible_queues()) IS NULL
           OR queue OPERATOR(pg_catalog.~~) ANY ((SELECT backoff._visible_queues())::text[]));

---- create above / drop below ----

-- Queue-scoped privileges: the policies call a function dropped below.
DROP POLICY IF EXISTS jobs_worker_read ON backoff.jobs;
DROP POLICY IF EXISTS jobs_admin ON backoff.jobs;
ALTER TABLE backoff.jobs DISABLE ROW LEVEL SECURITY;

-- Back to version 3: drop every function, undo the schema changes, then
-- install round 1's functions with migration 003's privileges.
DO $$
DECLARE
    v_fn pg_catalog.regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
    LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s CASCADE', v_fn);
    END LOOP;
END
$$;

-- == Undo the schema changes (reverse order of the sections above) ==

-- -- Queue-scoped privileges --
DROP TABLE backoff.queue_grants;

-- (end of undo)

{{ install_snapshot "002" }}

DO $$
DECLARE
    v_fn   record;
    v_role text;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure AS sig, p.proname::text AS name
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO backoff_owner', v_fn.sig);
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn.sig);
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
