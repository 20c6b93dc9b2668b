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

-- == Workers read jobs through backoff.job (docs/adr/0058) ==
-- Row-level security hides another queue's rows from a scoped worker's
-- SELECT, but not their existence: EXPLAIN ANALYZE counts the rows its
-- filter removed, so a foreign id answered differently from a missing one.
-- Workers read a job through backoff.job(id), which applies the scope, and
-- no longer read the table; admins still do. The policy stays, for a role
-- granted SELECT by hand.
REVOKE SELECT ON backoff.jobs FROM backoff_worker;

-- == Periodic jobs (docs/adr/0063) ==
-- One row per schedule, written only through backoff.put_schedule (admin):
-- a 5-field cron expression, parsed once into the sets below, or a fixed
-- interval from an anchor; the job it enqueues; the missed-slot policy;
-- and the next fire time, which backoff.fire_schedules advances under a
-- row lock. A schedule lives on the shard of its queue (a router routes
-- put_schedule by queue), so no two databases fire the same slot.
CREATE TABLE backoff.schedules (
    name              text PRIMARY KEY,
    queue             text NOT NULL,
    payload           jsonb NOT NULL DEFAULT '{}'::jsonb,
    cron              text,
    every             interval,
    anchor            timestamptz,
    time_zone         text NOT NULL DEFAULT 'UTC'::text,
    -- The cron expression's sets (weekdays 0-6, Sunday 0), sorted; days_or:
    -- both day fields restricted, either one matches (cron's rule);
    -- fixed_time: neither minute nor hour starts with *, which decides what
    -- daylight saving does to it (docs/adr/0063).
    minutes           integer[],
    hours             integer[],
    days              integer[],
    months            integer[],
    weekdays          integer[],
    days_or           boolean,
    fixed_time        boolean,
    policy            text,
    priority          integer NOT NULL DEFAULT 0,
    max_attempts      integer CONSTRAINT schedules_max_attempts_check CHECK (max_attempts >= 1),
    paused            boolean NOT NULL DEFAULT false,
    catch_up          text NOT NULL DEFAULT 'latest'::text
                      CONSTRAINT schedules_catch_up_check CHECK (catch_up IN ('latest', 'all')),
    catch_up_window   interval
                      CONSTRAINT schedules_catch_up_window_check
                      CHECK (catch_up_window > interval '0' AND catch_up_window <= interval '876600 hours'),
    catch_up_limit    integer NOT NULL DEFAULT 100
                      CONSTRAINT schedules_catch_up_limit_check CHECK (catch_up_limit BETWEEN 1 AND 10000),
    skip_if_running   boolean NOT NULL DEFAULT false,
    next_fire_at      timestamptz,
    last_slot         timestamptz,
    fired             bigint NOT NULL DEFAULT 0,
    skipped           bigint NOT NULL DEFAULT 0,
    last_skipped_slot timestamptz,
    last_missed_at    timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    CONSTRAINT schedules_timing_check CHECK ((cron IS NULL) <> (every IS NULL)),
    CONSTRAINT schedules_every_check
        CHECK (every >= interval '1 second' AND every <= interval '876600 hours'),
    CONSTRAINT schedules_cron_parsed_check
        CHECK (cron IS NULL OR (minutes IS NOT NULL AND hours IS NOT NULL AND days IS NOT NULL
                                AND months IS NOT NULL AND weekdays IS NOT NULL
                                AND days_or IS NOT NULL AND fixed_time IS NOT NULL))
);
-- What fire_schedules reads when nothing is due: one probe.
CREATE INDEX schedules_due_idx ON backoff.schedules (next_fire_at) WHERE NOT paused;
ALTER TABLE backoff.schedules OWNER TO backoff_owner;
REVOKE ALL ON backoff.schedules FROM PUBLIC;
-- Admins read schedules; every write goes through the functions, which
-- keep the parsed sets and the next fire time in step with the expression.
GRANT SELECT ON backoff.schedules TO backoff_admin;
-- The job records its schedule and slot. The unique index is the second
-- guarantee that a slot fires once (the first is the schedule's row lock);
-- partial, so that jobs without a schedule add nothing to it. The second
-- index finds a schedule's unfinished jobs (skip_if_running) without
-- reading its finished ones.
ALTER TABLE backoff.jobs
    ADD COLUMN schedule text,
    ADD COLUMN schedule_slot timestamptz;
CREATE UNIQUE INDEX jobs_schedule_slot_idx ON backoff.jobs (schedule, schedule_slot)
    WHERE schedule IS NOT NULL;
CREATE INDEX jobs_schedule_live_idx ON backoff.jobs (schedule)
    WHERE schedule IS NOT NULL AND status IN ('pending', 'running', 'retrying');

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

-- Periodic jobs.
DROP INDEX backoff.jobs_schedule_live_idx;
DROP INDEX backoff.jobs_schedule_slot_idx;
ALTER TABLE backoff.jobs DROP COLUMN schedule_slot, DROP COLUMN schedule;
DROP TABLE backoff.schedules;

-- Workers read jobs through backoff.job.
GRANT SELECT ON backoff.jobs TO backoff_worker;

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
