-- Round 2: the schema changes of DESIGN §11, then the working copy of every
-- function (snapshot "unreleased", sql/functions), then their privileges.
-- Round 1's functions stay frozen in snapshots/002 (migration 002), so this
-- is the only migration that installs "unreleased" (docs/adr/0003).
--
-- Each section below belongs to one change; its down counterpart is in the
-- same order, reversed, after the marker.

-- == Schema changes (one section per change; added by the round-2 work) ==

-- -- Wake-ups only for waiting workers (DESIGN §11.6, docs/adr/0027) --
-- A worker whose claim found a queue empty registers here that it waits
-- for that queue (backoff.wait_for_jobs); backoff.enqueue notifies only when
-- a live registration exists (one index probe), so a busy system, whose
-- workers never write here, sends no NOTIFY. A registration ends with
-- backoff.stop_waiting or at expires_at (a worker that died).
CREATE TABLE backoff.waiting_workers (
    queue      text NOT NULL CHECK (queue <> ''),
    worker     text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (queue, worker)
);
ALTER TABLE backoff.waiting_workers OWNER TO backoff_owner;
REVOKE ALL ON backoff.waiting_workers FROM PUBLIC;
GRANT SELECT ON backoff.waiting_workers TO backoff_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON backoff.waiting_workers TO backoff_admin;

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
                       'wait_for_jobs', 'stop_waiting'))
               OR (v_role = 'backoff_admin' AND v_fn.name NOT LIKE '\_%') THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn.sig, v_role);
            END IF;
        END LOOP;
    END LOOP;
END
$$;

---- create above / drop below ----

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

-- -- Wake-ups only for waiting workers --
DROP TABLE backoff.waiting_workers;

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
