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

-- == Liveness of the maintenance (docs/adr/0079) ==
-- When reap, rotate and fire_schedules last ran, and when rotate last
-- truncated a segment: one row per task, written by those calls at most
-- once every 15 seconds (rotate's truncate whenever it truncates), never
-- by claim or complete. And the workers that named themselves to rotate
-- (every Worker does, beside each reap), each at most once every 15
-- seconds. backoff.liveness and backoff.health read them; admins may
-- read them, nobody writes them but the functions. NULL: never ran.
CREATE TABLE backoff.maintenance (
    task   text PRIMARY KEY
           CONSTRAINT maintenance_task_check CHECK (task IN ('reap', 'rotate', 'truncate', 'fire_schedules')),
    ran_at timestamptz
);
INSERT INTO backoff.maintenance (task) VALUES ('reap'), ('rotate'), ('truncate'), ('fire_schedules');
CREATE TABLE backoff.maintenance_workers (
    worker  text PRIMARY KEY,
    seen_at timestamptz NOT NULL
);
ALTER TABLE backoff.maintenance OWNER TO backoff_owner;
ALTER TABLE backoff.maintenance_workers OWNER TO backoff_owner;
REVOKE ALL ON backoff.maintenance, backoff.maintenance_workers FROM PUBLIC;
GRANT SELECT ON backoff.maintenance, backoff.maintenance_workers TO backoff_admin;

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

-- == Live jobs in rotating segments (docs/adr/0061) ==
-- backoff.jobs becomes a table partitioned by LIST (segment): the live jobs
-- (pending, running, retrying) in segments 1, 2 and 3, of which one is
-- current (backoff.segments: enqueue inserts there), the finished ones in
-- segment 0 (backoff.jobs_finished), which the hot path only inserts into.
-- Finishing a job deletes its live row and inserts the finished one in one
-- statement; backoff.rotate makes the next empty segment current, moves
-- the few live rows left behind and TRUNCATEs a segment that holds none,
-- which drops its dead row versions and index entries whatever snapshot is
-- open. The parent keeps the name, so every read of backoff.jobs (the UI,
-- the CLI, row-level security, grants) is unchanged.
--
-- Today's table becomes segment 0 as it is: a `segment` column with a
-- constant default (no rewrite), a CHECK validated by one scan so that
-- ATTACH does not scan again, and its indexes attached to the parent's
-- partitioned indexes of the same definition (no build). Only the live
-- rows are moved (found through the claim and lease indexes), so apart
-- from that scan the cost follows the live jobs, not the history.
--
-- The functions whose signature names the row type of backoff.jobs go
-- first: after the rename they would name the finished partition's.
DO $$
DECLARE
    v_fn pg_catalog.regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
          AND ('backoff.jobs'::pg_catalog.regtype = p.prorettype
               OR 'backoff.jobs'::pg_catalog.regtype = ANY (p.proargtypes::pg_catalog.oid[])
               OR 'backoff.jobs'::pg_catalog.regtype = ANY (coalesce(p.proallargtypes, '{}')))
    LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', v_fn);
    END LOOP;
END
$$;
ALTER TABLE backoff.jobs RENAME TO jobs_finished;
ALTER INDEX backoff.jobs_pkey RENAME TO jobs_finished_pkey;
ALTER INDEX backoff.jobs_claimable_idx RENAME TO jobs_finished_claimable_idx;
ALTER INDEX backoff.jobs_lease_idx RENAME TO jobs_finished_lease_idx;
ALTER INDEX backoff.jobs_finished_idx RENAME TO jobs_finished_finished_idx;
ALTER INDEX backoff.jobs_failed_idx RENAME TO jobs_finished_failed_idx;
ALTER INDEX backoff.jobs_dead_idx RENAME TO jobs_finished_dead_idx;
ALTER INDEX backoff.jobs_dead_letters_idx RENAME TO jobs_finished_dead_letters_idx;
ALTER INDEX backoff.jobs_schedule_live_idx RENAME TO jobs_finished_schedule_live_idx;
ALTER INDEX backoff.jobs_schedule_slot_idx RENAME TO jobs_finished_schedule_slot_idx;
ALTER STATISTICS backoff.jobs_queue_status RENAME TO jobs_finished_queue_status;

-- No CHECK constraint (docs/adr/0084): the functions are what writes
-- jobs, and each states the rules the old table declared (a status of
-- pending, running, retrying, completed, dead_lettered or cancelled, and
-- blocked since workflows, below; a
-- lease exactly while running; attempts >= 0, max_attempts >= 1,
-- uncounted_attempts between 0 and attempts; a non-empty queue; a dead
-- letter reason from its list). PostgreSQL rebuilds a table's CHECK
-- expressions from their stored text for every writing statement, about
-- 200,000 instructions a statement for these seven, a third of a job's
-- enqueue, claim and complete together.
CREATE TABLE backoff.jobs (
    id                 bigint GENERATED ALWAYS AS IDENTITY,
    queue              text NOT NULL,
    payload            jsonb NOT NULL DEFAULT '{}',
    status             text NOT NULL DEFAULT 'pending',
    priority           integer NOT NULL DEFAULT 0,
    attempts           integer NOT NULL DEFAULT 0,
    max_attempts       integer,
    policy             text,
    run_at             timestamptz NOT NULL,
    lease_until        timestamptz,
    locked_by          text,
    last_attempted_at  timestamptz,
    last_failed_at     timestamptz,
    last_error         text,
    errors             jsonb NOT NULL DEFAULT '[]',
    dead_letter_reason text,
    dedupe_key         text,
    created_at         timestamptz NOT NULL,
    completed_at       timestamptz,
    uncounted_attempts integer NOT NULL DEFAULT 0,
    lease_expiries     integer NOT NULL DEFAULT 0,
    schedule           text,
    schedule_slot      timestamptz,
    -- 0: finished jobs; 1 and up: live jobs, one segment current. The functions
    -- always name it; an INSERT that does not lands in the current segment
    -- (the DEFAULT set after the functions below, backoff._current_segment).
    -- A finished job inserted there, or a live one into 0, is moved by
    -- backoff.rotate, and every by-id function finds a job in any segment.
    segment            smallint NOT NULL DEFAULT 0
) PARTITION BY LIST (segment);
-- The identity continues the old table's sequence (its range too: a shard's
-- ids carry the shard, docs/adr/0034); the old identity then goes, and the
-- sequence takes its name.
DO $$
DECLARE
    v_old  pg_catalog.regclass := pg_catalog.pg_get_serial_sequence('backoff.jobs_finished', 'id')::pg_catalog.regclass;
    v_new  pg_catalog.regclass := pg_catalog.pg_get_serial_sequence('backoff.jobs', 'id')::pg_catalog.regclass;
    v_seq  record;
    v_last bigint := pg_catalog.pg_sequence_last_value(v_old);
BEGIN
    SELECT s.seqstart, s.seqmin, s.seqmax, s.seqincrement, s.seqcache, s.seqcycle INTO v_seq
    FROM pg_catalog.pg_sequence AS s WHERE s.seqrelid = v_old;
    EXECUTE pg_catalog.format(
        'ALTER TABLE backoff.jobs ALTER COLUMN id SET INCREMENT BY %s SET MINVALUE %s SET MAXVALUE %s SET START WITH %s SET CACHE %s SET %s',
        v_seq.seqincrement, v_seq.seqmin, v_seq.seqmax, v_seq.seqstart, v_seq.seqcache,
        CASE WHEN v_seq.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END);
    IF v_last IS NOT NULL THEN
        PERFORM pg_catalog.setval(v_new, v_last, true);
    END IF;
    ALTER TABLE backoff.jobs_finished ALTER COLUMN id DROP IDENTITY;
    EXECUTE pg_catalog.format('ALTER SEQUENCE %s RENAME TO jobs_id_seq', v_new);
END
$$;
CREATE TABLE backoff.jobs_live_1 PARTITION OF backoff.jobs FOR VALUES IN (1);
CREATE TABLE backoff.jobs_live_2 PARTITION OF backoff.jobs FOR VALUES IN (2);
CREATE TABLE backoff.jobs_live_3 PARTITION OF backoff.jobs FOR VALUES IN (3);
-- A partitioned table's unique index must contain the partition key: ids
-- are unique by their sequence, and each partition checks it for its rows
-- (the same index serves by-id lookups). The slot of a schedule is unique
-- per partition; across partitions the schedule's row lock in
-- fire_schedules is the guarantee.
ALTER TABLE backoff.jobs_live_1 ADD CONSTRAINT jobs_live_1_pkey PRIMARY KEY (id);
ALTER TABLE backoff.jobs_live_2 ADD CONSTRAINT jobs_live_2_pkey PRIMARY KEY (id);
ALTER TABLE backoff.jobs_live_3 ADD CONSTRAINT jobs_live_3_pkey PRIMARY KEY (id);
CREATE UNIQUE INDEX jobs_live_1_schedule_slot_idx ON backoff.jobs_live_1 (schedule, schedule_slot) WHERE schedule IS NOT NULL;
CREATE UNIQUE INDEX jobs_live_2_schedule_slot_idx ON backoff.jobs_live_2 (schedule, schedule_slot) WHERE schedule IS NOT NULL;
CREATE UNIQUE INDEX jobs_live_3_schedule_slot_idx ON backoff.jobs_live_3 (schedule, schedule_slot) WHERE schedule IS NOT NULL;
-- The indexes of migrations 001 and 004, partitioned (same definitions, so
-- ATTACH below adopts the old table's). Each segment's are created first,
-- under names that say what they are, and the parent's adopt them.
DO $$
DECLARE
    v_seg integer;
BEGIN
    FOR v_seg IN 1..3 LOOP
        EXECUTE pg_catalog.format($i$
            CREATE INDEX jobs_live_%1$s_claimable_idx ON backoff.jobs_live_%1$s (queue, priority DESC, run_at, id) INCLUDE (status)
                WHERE status IN ('pending', 'retrying');
            CREATE INDEX jobs_live_%1$s_lease_idx ON backoff.jobs_live_%1$s (lease_until) WHERE lease_until IS NOT NULL;
            CREATE INDEX jobs_live_%1$s_finished_idx ON backoff.jobs_live_%1$s (queue, completed_at, id) INCLUDE (status)
                WHERE completed_at IS NOT NULL;
            CREATE INDEX jobs_live_%1$s_failed_idx ON backoff.jobs_live_%1$s (last_failed_at) WHERE last_failed_at IS NOT NULL;
            CREATE INDEX jobs_live_%1$s_dead_idx ON backoff.jobs_live_%1$s (status, queue, id)
                WHERE status IN ('dead_lettered', 'cancelled');
            CREATE INDEX jobs_live_%1$s_dead_letters_idx ON backoff.jobs_live_%1$s (queue, dead_letter_reason, completed_at, id)
                WHERE status = 'dead_lettered';
            CREATE INDEX jobs_live_%1$s_schedule_live_idx ON backoff.jobs_live_%1$s (schedule)
                WHERE schedule IS NOT NULL AND status IN ('pending', 'running', 'retrying');
            $i$, v_seg);
    END LOOP;
END
$$;
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id) INCLUDE (status)
    WHERE status IN ('pending', 'retrying');
CREATE INDEX jobs_lease_idx ON backoff.jobs (lease_until) WHERE lease_until IS NOT NULL;
CREATE INDEX jobs_finished_idx ON backoff.jobs (queue, completed_at, id) INCLUDE (status)
    WHERE completed_at IS NOT NULL;
CREATE INDEX jobs_failed_idx ON backoff.jobs (last_failed_at) WHERE last_failed_at IS NOT NULL;
CREATE INDEX jobs_dead_idx ON backoff.jobs (status, queue, id) WHERE status IN ('dead_lettered', 'cancelled');
CREATE INDEX jobs_dead_letters_idx ON backoff.jobs (queue, dead_letter_reason, completed_at, id)
    WHERE status = 'dead_lettered';
CREATE INDEX jobs_schedule_live_idx ON backoff.jobs (schedule)
    WHERE schedule IS NOT NULL AND status IN ('pending', 'running', 'retrying');
CREATE STATISTICS backoff.jobs_queue_status (mcv) ON queue, status FROM backoff.jobs;
ALTER STATISTICS backoff.jobs_queue_status OWNER TO backoff_owner;

-- Which segment is current, and the id sequence's value when it became
-- current (backoff.rotate counts the jobs it took from that). Written by
-- backoff.rotate only, which also adds segments past the first three while
-- a transaction that read backoff.jobs holds them (docs/adr/0082).
CREATE TABLE backoff.segments (
    segment     smallint PRIMARY KEY CONSTRAINT segments_segment_check CHECK (segment >= 1),
    current     boolean NOT NULL,
    first_id    bigint NOT NULL,
    switched_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX segments_one_current ON backoff.segments (current) WHERE current;
INSERT INTO backoff.segments (segment, current, first_id, switched_at)
SELECT g, g = 1, coalesce(pg_catalog.pg_sequence_last_value('backoff.jobs_id_seq'), 0), pg_catalog.now()
FROM pg_catalog.generate_series(1, 3) AS g;
-- How many jobs the current segment takes before the next one becomes
-- current (at least: never fewer than the live jobs, docs/adr/0061). Under
-- an old snapshot a claim walks the dead entries of up to that many
-- claims: the prototype held the offered rate with segments of 10,000 to
-- 12,500 jobs, and the benchmark's smoke run fell behind with 50,000. With
-- 5,000 the claim's p99 under a held snapshot stays well within twice the
-- free one, which 10,000 did not always (docs/benchmarks.md).
ALTER TABLE backoff.settings
    ADD COLUMN segment_jobs bigint NOT NULL DEFAULT 5000
        CONSTRAINT settings_segment_jobs_check CHECK (segment_jobs >= 1);

-- One row per unfinished job that carries a dedupe key: the key is unique
-- here, as the partial unique index of migration 001 made it among the
-- unfinished jobs of one table. Written by enqueue, removed when the job
-- finishes, written again by replay.
CREATE TABLE backoff.dedupe_keys (
    queue      text NOT NULL,
    dedupe_key text NOT NULL,
    job_id     bigint NOT NULL,
    CONSTRAINT dedupe_keys_pkey PRIMARY KEY (queue, dedupe_key)
);
DROP INDEX backoff.jobs_dedupe_key_idx;

-- Move the live rows, then attach what is left as segment 0.
WITH d AS (
    DELETE FROM backoff.jobs_finished AS j
    WHERE j.status IN ('pending', 'retrying') OR j.lease_until IS NOT NULL
    RETURNING j.*
), k AS (
    INSERT INTO backoff.dedupe_keys (queue, dedupe_key, job_id)
    SELECT d.queue, d.dedupe_key, d.id FROM d WHERE d.dedupe_key IS NOT NULL
)
INSERT INTO backoff.jobs (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                          lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                          dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                          lease_expiries, schedule, schedule_slot, segment)
OVERRIDING SYSTEM VALUE
SELECT d.id, d.queue, d.payload, d.status, d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
       d.lease_until, d.locked_by, d.last_attempted_at, d.last_failed_at, d.last_error, d.errors,
       d.dead_letter_reason, d.dedupe_key, d.created_at, d.completed_at, d.uncounted_attempts,
       d.lease_expiries, d.schedule, d.schedule_slot, 1
FROM d;
-- The old table's CHECK constraints go with the parent's (above).
ALTER TABLE backoff.jobs_finished
    DROP CONSTRAINT jobs_queue_check,
    DROP CONSTRAINT jobs_status_check,
    DROP CONSTRAINT jobs_attempts_check,
    DROP CONSTRAINT jobs_max_attempts_check,
    DROP CONSTRAINT jobs_dead_letter_reason_check,
    DROP CONSTRAINT jobs_lease_while_running,
    DROP CONSTRAINT jobs_uncounted_attempts_check;
ALTER TABLE backoff.jobs_finished
    ADD COLUMN segment smallint NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_finished_segment_check CHECK (segment = 0) NOT VALID;
ALTER TABLE backoff.jobs_finished VALIDATE CONSTRAINT jobs_finished_segment_check;
ALTER TABLE backoff.jobs ATTACH PARTITION backoff.jobs_finished FOR VALUES IN (0);
-- The partition constraint says the same from now on.
ALTER TABLE backoff.jobs_finished DROP CONSTRAINT jobs_finished_segment_check;

-- Owner, grants and row-level security of migrations 003, 004 and this
-- one, on the parent (the partitions are reached through it; the old
-- table keeps its own, which apply to it alone).
-- (The owner truncates the segments in backoff.rotate; ALTER TABLE ... OWNER
-- does not recurse to partitions.)
ALTER TABLE backoff.jobs OWNER TO backoff_owner;
ALTER TABLE backoff.jobs_live_1 OWNER TO backoff_owner;
ALTER TABLE backoff.jobs_live_2 OWNER TO backoff_owner;
ALTER TABLE backoff.jobs_live_3 OWNER TO backoff_owner;
ALTER TABLE backoff.segments OWNER TO backoff_owner;
ALTER TABLE backoff.dedupe_keys OWNER TO backoff_owner;
REVOKE ALL ON backoff.jobs, backoff.segments, backoff.dedupe_keys FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON backoff.jobs TO backoff_admin;
GRANT SELECT ON backoff.segments, backoff.dedupe_keys TO backoff_admin;
ALTER TABLE backoff.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_admin ON backoff.jobs TO backoff_admin USING (true) WITH CHECK (true);
CREATE POLICY jobs_worker_read ON backoff.jobs FOR SELECT TO backoff_worker
    USING ((SELECT backoff._visible_queues()) IS NULL
           OR queue OPERATOR(pg_catalog.~~) ANY ((SELECT backoff._visible_queues())::text[]));

-- == A schedule's jobs in the operator's reads (docs/adr/0072) ==
-- list_jobs and count_jobs filter by the schedule that enqueued a job, and
-- list_jobs and job_detail return its schedule and slot: new signatures
-- (and job_detail a new row type), installed below.
DROP FUNCTION IF EXISTS backoff.list_jobs(text, text[], text, text, text, timestamptz, timestamptz, timestamptz,
                                          timestamptz, text, bigint, timestamptz, integer, boolean, integer);
DROP FUNCTION IF EXISTS backoff.count_jobs(text, text[], text, text, text, text, timestamptz, timestamptz, timestamptz,
                                           timestamptz, bigint);
DROP FUNCTION IF EXISTS backoff._job_filter(text, text[], text, text, timestamptz, timestamptz, timestamptz, timestamptz);
DROP FUNCTION IF EXISTS backoff.job_detail(bigint, integer);

-- == Missed slots counted (docs/adr/0076) ==
-- fire_schedules counts the slots it passes over: with catch_up 'latest'
-- those whose interval ended max_clock_skew or more before its clock, and
-- those older than catch_up_window.
ALTER TABLE backoff.schedules ADD COLUMN missed bigint NOT NULL DEFAULT 0;

-- == Workflows: dependencies, outputs and progress (docs/adr/0087) ==
-- A job that depends on others is 'blocked': live (in a live segment, its
-- dedupe key held) but outside the claim index, whose predicate names
-- 'pending' and 'retrying' only, so claims never walk it. It becomes
-- 'pending' in the transaction that settles its last parent. (The job
-- table declares no status list, docs/adr/0084: the functions keep it.)
-- One row per edge: child_id waits for parent_id. on_failure says what a
-- parent that ends without completing (dead_lettered, cancelled) does to
-- the child: 'cancel' it, let it 'run' (the edge is satisfied), or keep it
-- blocked until an operator acts ('wait'). state: 'open' until the parent
-- finishes, then 'satisfied', 'failed' (the child was cancelled),
-- 'waiting' (a 'wait' edge whose parent failed; replay of the parent opens
-- it again) or 'released' (backoff.unblock). Completing a parent reads its
-- open edges by parent_id; prune reads them to keep what a child needs.
CREATE TABLE backoff.job_dependencies (
    child_id   bigint NOT NULL,
    parent_id  bigint NOT NULL,
    on_failure text NOT NULL DEFAULT 'cancel'
               CONSTRAINT job_dependencies_on_failure_check CHECK (on_failure IN ('cancel', 'run', 'wait')),
    state      text NOT NULL DEFAULT 'open'
               CONSTRAINT job_dependencies_state_check CHECK (state IN ('open', 'satisfied', 'failed', 'waiting', 'released')),
    CONSTRAINT job_dependencies_pkey PRIMARY KEY (child_id, parent_id),
    CONSTRAINT job_dependencies_no_self CHECK (child_id <> parent_id)
);
CREATE INDEX job_dependencies_parent_idx ON backoff.job_dependencies (parent_id);
-- One row per blocked job: how many of its edges are still open
-- (remaining) and how many wait for an operator (waiting). A parent that
-- settles decrements it under the row's lock, so of two last parents
-- settling at once the second sees the first's decrement (READ COMMITTED
-- re-reads the locked row) and unblocks the child: the last parent's work
-- is one row, whatever the fan-in.
CREATE TABLE backoff.job_blockers (
    job_id    bigint PRIMARY KEY,
    remaining integer NOT NULL CONSTRAINT job_blockers_remaining_check CHECK (remaining >= 0),
    waiting   integer NOT NULL DEFAULT 0 CONSTRAINT job_blockers_waiting_check CHECK (waiting >= 0)
);
-- A job's result, recorded by complete or complete_many: apart from the
-- job row, so that the claim path never reads or moves it.
CREATE TABLE backoff.job_outputs (
    job_id      bigint PRIMARY KEY,
    output      jsonb NOT NULL,
    recorded_at timestamptz NOT NULL
);
-- The last progress a running attempt reported with its heartbeat.
-- Beside the job row, so that rotate's and the settling calls' moves of
-- the row neither carry nor lose it.
CREATE TABLE backoff.job_progress (
    job_id      bigint PRIMARY KEY,
    attempt     integer NOT NULL,
    progress    jsonb NOT NULL,
    reported_at timestamptz NOT NULL
);
ALTER TABLE backoff.job_dependencies OWNER TO backoff_owner;
ALTER TABLE backoff.job_blockers OWNER TO backoff_owner;
ALTER TABLE backoff.job_outputs OWNER TO backoff_owner;
ALTER TABLE backoff.job_progress OWNER TO backoff_owner;
REVOKE ALL ON backoff.job_dependencies, backoff.job_blockers, backoff.job_outputs, backoff.job_progress FROM PUBLIC;
GRANT SELECT ON backoff.job_dependencies, backoff.job_blockers, backoff.job_outputs, backoff.job_progress TO backoff_admin;
-- Output size limits: a default for every queue, and a queue's own
-- (NULL: the default), both at most 64 MiB.
ALTER TABLE backoff.settings
    ADD COLUMN max_output_bytes integer NOT NULL DEFAULT 1048576
        CONSTRAINT settings_max_output_bytes_check CHECK (max_output_bytes >= 1024 AND max_output_bytes <= 67108864);
ALTER TABLE backoff.queues
    ADD COLUMN max_output_bytes integer
        CONSTRAINT queues_max_output_bytes_check CHECK (max_output_bytes >= 1024 AND max_output_bytes <= 67108864);
-- Who awaits which job (backoff.await_job): the call that finishes a job
-- notifies channel backoff_finished for it, and deletes its rows. Empty
-- unless the feature is used, so that the finishing calls' probe of it
-- costs next to nothing.
CREATE TABLE backoff.job_awaiters (
    job_id     bigint NOT NULL,
    awaiter    text NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT job_awaiters_pkey PRIMARY KEY (job_id, awaiter)
);
ALTER TABLE backoff.job_awaiters OWNER TO backoff_owner;
REVOKE ALL ON backoff.job_awaiters FROM PUBLIC;
GRANT SELECT ON backoff.job_awaiters TO backoff_admin;
-- New signatures: complete and complete_many take an output, heartbeat a
-- progress document; the old ones go so that calls do not become ambiguous.
DROP FUNCTION IF EXISTS backoff.complete(bigint, integer, timestamptz);
DROP FUNCTION IF EXISTS backoff.complete_many(bigint[], integer[], timestamptz);
DROP FUNCTION IF EXISTS backoff.heartbeat(bigint, integer, interval, timestamptz);

-- (end of schema changes)

{{ install_snapshot "unreleased" }}

-- == Live jobs in rotating segments: the default segment (docs/adr/0061) ==
-- Here, after the functions: the default calls one. ONLY: an INSERT through
-- backoff.jobs takes the parent's default; the finished partition keeps its
-- own 0, which the undo below relies on once the DROP FUNCTION ... CASCADE
-- there has dropped this default with the function.
ALTER TABLE ONLY backoff.jobs ALTER COLUMN segment SET DEFAULT backoff._current_segment();

---- create above / drop below ----

-- Back to version 4: drop every function and procedure (the row-level security policy
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
        EXECUTE pg_catalog.format('DROP ROUTINE %s CASCADE', v_fn);
    END LOOP;
END
$$;

-- == Undo the schema changes (reverse order of the sections above) ==

-- == Workflows: dependencies, outputs and progress (docs/adr/0087) ==
-- Version 4 has no blocked status: refuse while a job still waits for a
-- parent (complete, cancel or unblock it first).
DO $$
BEGIN
    IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.status = 'blocked') THEN
        RAISE EXCEPTION 'cannot migrate below version 5: jobs are blocked by dependencies; finish, cancel or unblock them first'
            USING ERRCODE = 'object_in_use';
    END IF;
END
$$;
ALTER TABLE backoff.queues DROP COLUMN max_output_bytes;
ALTER TABLE backoff.settings DROP COLUMN max_output_bytes;
DROP TABLE backoff.job_awaiters;
DROP TABLE backoff.job_progress;
DROP TABLE backoff.job_outputs;
DROP TABLE backoff.job_blockers;
DROP TABLE backoff.job_dependencies;

-- == Missed slots counted (docs/adr/0076) ==
ALTER TABLE backoff.schedules DROP COLUMN missed;

-- == A schedule's jobs in the operator's reads (docs/adr/0072) ==
-- Nothing to undo: the functions are gone already (above).

-- == Live jobs in rotating segments (docs/adr/0061) ==
-- Back to one table: the finished partition is detached, the live rows
-- return to it, it gets the identity back (continuing the sequence, with
-- its range), its indexes and statistics their names, and the dedupe index
-- of migration 001 is built again. The functions that named the row type
-- are gone already (above); the policies on the old table were kept.
ALTER TABLE backoff.jobs DETACH PARTITION backoff.jobs_finished;
INSERT INTO backoff.jobs_finished (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                   lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                   dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                   lease_expiries, schedule, schedule_slot)
SELECT j.id, j.queue, j.payload, j.status, j.priority, j.attempts, j.max_attempts, j.policy, j.run_at,
       j.lease_until, j.locked_by, j.last_attempted_at, j.last_failed_at, j.last_error, j.errors,
       j.dead_letter_reason, j.dedupe_key, j.created_at, j.completed_at, j.uncounted_attempts,
       j.lease_expiries, j.schedule, j.schedule_slot
FROM backoff.jobs AS j;
ALTER TABLE backoff.jobs_finished DROP COLUMN segment;
DO $$
DECLARE
    v_seq  pg_catalog.regclass := pg_catalog.pg_get_serial_sequence('backoff.jobs', 'id')::pg_catalog.regclass;
    v_s    record;
    v_last bigint := pg_catalog.pg_sequence_last_value(v_seq);
BEGIN
    SELECT s.seqstart, s.seqmin, s.seqmax, s.seqincrement, s.seqcache, s.seqcycle INTO v_s
    FROM pg_catalog.pg_sequence AS s WHERE s.seqrelid = v_seq;
    DROP TABLE backoff.jobs;
    EXECUTE pg_catalog.format(
        'ALTER TABLE backoff.jobs_finished ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY '
        '(SEQUENCE NAME backoff.jobs_id_seq INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %s)',
        v_s.seqincrement, v_s.seqmin, v_s.seqmax, v_s.seqstart, v_s.seqcache,
        CASE WHEN v_s.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END);
    IF v_last IS NOT NULL THEN
        PERFORM pg_catalog.setval('backoff.jobs_id_seq', v_last, true);
    END IF;
END
$$;
DROP TABLE backoff.dedupe_keys;
DROP TABLE backoff.segments;
ALTER TABLE backoff.settings DROP COLUMN segment_jobs;
ALTER TABLE backoff.jobs_finished RENAME TO jobs;
ALTER INDEX backoff.jobs_finished_pkey RENAME TO jobs_pkey;
ALTER INDEX backoff.jobs_finished_claimable_idx RENAME TO jobs_claimable_idx;
ALTER INDEX backoff.jobs_finished_lease_idx RENAME TO jobs_lease_idx;
ALTER INDEX backoff.jobs_finished_finished_idx RENAME TO jobs_finished_idx;
ALTER INDEX backoff.jobs_finished_failed_idx RENAME TO jobs_failed_idx;
ALTER INDEX backoff.jobs_finished_dead_idx RENAME TO jobs_dead_idx;
ALTER INDEX backoff.jobs_finished_dead_letters_idx RENAME TO jobs_dead_letters_idx;
ALTER INDEX backoff.jobs_finished_schedule_live_idx RENAME TO jobs_schedule_live_idx;
ALTER INDEX backoff.jobs_finished_schedule_slot_idx RENAME TO jobs_schedule_slot_idx;
ALTER STATISTICS backoff.jobs_finished_queue_status RENAME TO jobs_queue_status;
-- The CHECK constraints of migrations 001 and 004, validated by one scan.
ALTER TABLE backoff.jobs
    ADD CONSTRAINT jobs_queue_check CHECK (queue <> ''),
    ADD CONSTRAINT jobs_status_check
        CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'dead_lettered', 'cancelled')),
    ADD CONSTRAINT jobs_attempts_check CHECK (attempts >= 0),
    ADD CONSTRAINT jobs_max_attempts_check CHECK (max_attempts >= 1),
    ADD CONSTRAINT jobs_dead_letter_reason_check
        CHECK (dead_letter_reason IN ('max_attempts', 'non_retryable', 'deadline', 'lease_expiries')),
    ADD CONSTRAINT jobs_lease_while_running CHECK ((status = 'running') = (lease_until IS NOT NULL)),
    ADD CONSTRAINT jobs_uncounted_attempts_check CHECK (uncounted_attempts >= 0 AND uncounted_attempts <= attempts);
CREATE UNIQUE INDEX jobs_dedupe_key_idx ON backoff.jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying');

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

-- == Liveness of the maintenance (docs/adr/0079) ==
DROP TABLE backoff.maintenance_workers;
DROP TABLE backoff.maintenance;

-- Who holds back vacuum: the grant of pg_read_all_stats stays (see above).

-- (end of undo)

{{ install_snapshot "004" }}

CREATE POLICY jobs_worker_read ON backoff.jobs FOR SELECT TO backoff_worker
    USING ((SELECT backoff._visible_queues()) IS NULL
           OR queue OPERATOR(pg_catalog.~~) ANY ((SELECT backoff._visible_queues())::text[]));
