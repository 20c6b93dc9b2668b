-- Hardening found by an attack on the queue grants, the clock, the queue
-- controls and the input limits (docs/reliability.md, "Attacks"): the
-- schema changes below, then the working copy of every function (snapshot
-- "unreleased", sql/functions) with its privileges (privileges.sql).
-- Migration 004's functions stay frozen in snapshots/004.
--
-- Each section below belongs to one change; its down counterpart is in the
-- same order, reversed, after the marker.

-- == Schema changes (one section per change) ==

-- == Who holds back vacuum (backoff.health) ==
-- backoff.health names the oldest session that holds a snapshot; for
-- another role's session pg_stat_activity shows backend_xmin only to
-- members of pg_read_all_stats. The installer grants it to backoff_owner
-- where it may (a superuser, or a role with ADMIN OPTION on it); where it
-- may not, health says so in its warning, and a DBA can grant it later.
-- Roles belong to the whole server, so the down section keeps the grant,
-- as it keeps the roles (migration 003).
DO $$
BEGIN
    GRANT pg_read_all_stats TO backoff_owner;
EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
    RAISE NOTICE 'backoff_owner is not a member of pg_read_all_stats: backoff.health cannot see other roles'' sessions until a superuser runs GRANT pg_read_all_stats TO backoff_owner';
END
$$;

-- == Payload size limit (docs/adr/0059) ==
-- enqueue refuses a payload whose jsonb, uncompressed, is larger than this.
-- At least 1 KiB (enqueue reads the setting only for payloads above that),
-- at most the largest jsonb PostgreSQL builds.
ALTER TABLE backoff.settings
    ADD COLUMN max_payload_bytes integer NOT NULL DEFAULT 1048576
        CONSTRAINT settings_max_payload_bytes_check CHECK (max_payload_bytes >= 1024 AND max_payload_bytes <= 268435455);

-- == Queue scope fails closed (docs/adr/0058) ==
-- require_queue_grants: a worker or producer without any queue grant may act
-- on no queue (backoff._queue_scope), instead of on every queue. Existing
-- installs keep their behaviour (false); a database that never enqueued a
-- job, i.e. a new install, starts with it on, as does a settings row
-- written without it.
ALTER TABLE backoff.settings ADD COLUMN require_queue_grants boolean NOT NULL DEFAULT false;
ALTER TABLE backoff.settings ALTER COLUMN require_queue_grants SET DEFAULT true;
UPDATE backoff.settings SET require_queue_grants = true
WHERE pg_catalog.pg_sequence_last_value(pg_catalog.pg_get_serial_sequence('backoff.jobs', 'id')::pg_catalog.regclass) IS NULL;
-- Wake-up registrations name other queues' workers: workers register and
-- end their own through wait_for_jobs and stop_waiting only.
REVOKE SELECT ON backoff.waiting_workers FROM backoff_worker;

-- == Stranded work and operator history (docs/adr/0066) ==
-- Pauses and resumes of a queue, with the database role that asked and
-- when; prune deletes them with the finished jobs' retention. Replays and
-- cancels are recorded in the job's own history (backoff.jobs.errors).
CREATE TABLE backoff.queue_events (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue  text NOT NULL CHECK (queue <> ''),
    action text NOT NULL CHECK (action IN ('pause', 'resume')),
    role   text NOT NULL,
    at     timestamptz NOT NULL
);
CREATE INDEX queue_events_queue_idx ON backoff.queue_events (queue, at);
CREATE INDEX queue_events_at_idx ON backoff.queue_events (at);
ALTER TABLE backoff.queue_events OWNER TO backoff_owner;
REVOKE ALL ON backoff.queue_events FROM PUBLIC;
GRANT SELECT, DELETE ON backoff.queue_events TO backoff_admin;
-- New signatures: pause_queue and resume_queue take p_create and p_now,
-- _push_error the attempt's start and the role; overview and stats return
-- the expired leases (and stats the pause switch).
DROP FUNCTION IF EXISTS backoff.pause_queue(text);
DROP FUNCTION IF EXISTS backoff.resume_queue(text);
DROP FUNCTION IF EXISTS backoff._push_error(jsonb, integer, integer, timestamptz, text, text, text);
DROP FUNCTION IF EXISTS backoff.overview(timestamptz, integer);
DROP FUNCTION IF EXISTS backoff.stats(interval, timestamptz);

-- (end of schema changes)

{{ install_snapshot "unreleased" }}

---- create above / drop below ----

-- Back to version 4: drop every function (the row-level security policy
-- that calls backoff._visible_queues goes with it), undo the schema
-- changes, then install migration 004's functions and privileges and
-- re-create the policy.
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

-- == Stranded work and operator history (docs/adr/0066) ==
DROP TABLE backoff.queue_events;

-- == Queue scope fails closed (docs/adr/0058) ==
GRANT SELECT ON backoff.waiting_workers TO backoff_worker;
ALTER TABLE backoff.settings DROP COLUMN require_queue_grants;

-- Payload size limit (docs/adr/0059).
ALTER TABLE backoff.settings DROP COLUMN max_payload_bytes;

-- Who holds back vacuum: the grant of pg_read_all_stats stays (see above).

-- (end of undo)

{{ install_snapshot "004" }}

CREATE POLICY jobs_worker_read ON backoff.jobs FOR SELECT TO backoff_worker
    USING ((SELECT backoff._visible_queues()) IS NULL
           OR queue OPERATOR(pg_catalog.~~) ANY ((SELECT backoff._visible_queues())::text[]));
