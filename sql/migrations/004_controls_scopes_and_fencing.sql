-- Version 4: fencing tokens that never repeat, queue-scoped privileges,
-- queue controls and the other schema changes below, then the functions of
-- version 4 (frozen in snapshots/004) with their privileges. The functions
-- of migration 002 stay frozen in snapshots/002, which the down part
-- installs again (docs/adr/0003).
--
-- Each section below belongs to one change; its down counterpart is in the
-- same order, reversed, after the marker.

-- == Schema changes (one section per change) ==

-- == Install hygiene (install; docs/adr/0036) ==
-- Migration 001 (released, frozen) wrote CHECK constraints of
-- backoff.policies that an install run with a search_path where others may
-- CREATE could bind to planted look-alikes: array_position and cardinality
-- unqualified (public.array_position(interval[], interval) is a better
-- match than pg_catalog's polymorphic one), and float8 columns compared
-- with integer and numeric literals (a planted float8 >= integer operator
-- is a better match than pg_catalog's float8 >= float8). Every install
-- route now pins search_path = pg_catalog; these four constraints are
-- re-created (functions qualified, literals typed) so that an install made
-- before that is repaired by upgrading. Same meaning, same names.
ALTER TABLE backoff.policies
    DROP CONSTRAINT policies_schedule_check,
    ADD CONSTRAINT policies_schedule_check
        CHECK (pg_catalog.array_position(schedule, NULL) IS NULL
               AND interval '0' <= ALL (schedule) AND interval '876600 hours' >= ALL (schedule)),
    DROP CONSTRAINT policies_check,
    ADD CONSTRAINT policies_check CHECK (strategy <> 'schedule' OR pg_catalog.cardinality(schedule) > 0),
    DROP CONSTRAINT policies_multiplier_check,
    ADD CONSTRAINT policies_multiplier_check
        CHECK (multiplier >= 1::float8 AND multiplier <= 1000::float8),
    DROP CONSTRAINT policies_jitter_ratio_check,
    ADD CONSTRAINT policies_jitter_ratio_check
        CHECK (jitter_ratio = 0::float8 OR (jitter_ratio >= 0.000001::float8 AND jitter_ratio <= 1::float8));

-- == Time is not a privilege (install; docs/adr/0035) ==
-- One row of database-wide settings, read by backoff._now when a caller
-- passes a p_now other than now(); written by `backoffctl config apply`
-- from the [settings] table of the TOML.
CREATE TABLE backoff.settings (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    max_clock_skew interval NOT NULL DEFAULT '5 minutes'
                   CHECK (max_clock_skew >= interval '0' AND max_clock_skew <= interval '876600 hours'),
    time_injection boolean NOT NULL DEFAULT false,
    updated_at     timestamptz NOT NULL DEFAULT pg_catalog.now()
);
INSERT INTO backoff.settings DEFAULT VALUES;
ALTER TABLE backoff.settings OWNER TO backoff_owner;
REVOKE ALL ON backoff.settings FROM PUBLIC;
GRANT SELECT ON backoff.settings TO backoff_worker;
GRANT SELECT, INSERT, UPDATE ON backoff.settings TO backoff_admin;
-- ---- throughput: backoff._retry_decision becomes an inlinable set-returning
-- SQL function (docs/adr/0041); CREATE OR REPLACE cannot change a
-- function's return type, so migration 002's PL/pgSQL version is dropped first
-- (no object depends on it: fail and reap call it by name at run time and
-- are replaced below).
DROP FUNCTION IF EXISTS backoff._retry_decision(
    backoff.policies, bigint, integer, integer, timestamptz, timestamptz, interval, boolean, timestamptz);

-- == Fencing tokens that never repeat (fence; docs/adr/0020) ==
-- attempts now counts every claim over a job's life and never goes down
-- (snooze and replay no longer give numbers back), so the value a claim
-- returns is a token no later claim of the job can share.
-- uncounted_attempts counts the claims that do not count against the
-- budget: snooze adds 1, replay sets it to attempts (a fresh budget). The
-- counted attempt, which max_attempts bounds and the backoff's n is, is
-- attempts - uncounted_attempts.
-- Existing rows migrate with uncounted_attempts = 0, so their counted
-- attempt equals their attempts as before: no job's fate changes (same
-- budget left, same next delay), and a running job keeps its token.
-- ADD COLUMN with a constant default does not rewrite the table; the CHECK
-- is validated by one scan here and costs two integer comparisons per row
-- write afterwards. History entries written before this migration keep
-- their attempt numbers (which a replay may have restarted) and have no
-- "counted" key.
ALTER TABLE backoff.jobs
    ADD COLUMN uncounted_attempts integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT jobs_uncounted_attempts_check
        CHECK (uncounted_attempts >= 0 AND uncounted_attempts <= attempts);
-- backoff._push_error gains the counted attempt (p_counted); drop the old
-- six-argument form so that it does not linger as an unused overload.
DROP FUNCTION backoff._push_error(jsonb, integer, timestamptz, text, text, text);

-- == Queue-scoped privileges (grants; docs/adr/0038) ==
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
-- == Wake-ups only for waiting workers (worker; docs/adr/0027) ==
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

-- == Queue controls (queues-sql; docs/adr/0045, docs/adr/0046) ==
-- Settings of a queue's downstream, written by `backoffctl config apply` (or
-- an admin's INSERT/UPDATE) like policy: a rate limit (token bucket) and a
-- circuit breaker. All NULL (the default of every existing row) = off, so
-- no queue changes behaviour. ADD COLUMN without a volatile default does not
-- rewrite the table. Durations are bounded like the policies' (876600
-- hours) so that time arithmetic on them stays in range; literals are typed
-- (install hygiene, above).
ALTER TABLE backoff.queues
    ADD COLUMN rate double precision
        CONSTRAINT queues_rate_check CHECK (rate > 0::float8 AND rate < 'infinity'::float8),
    ADD COLUMN burst integer
        CONSTRAINT queues_burst_check CHECK (burst >= 1),
    ADD COLUMN breaker_failures integer
        CONSTRAINT queues_breaker_failures_check CHECK (breaker_failures >= 1),
    ADD COLUMN breaker_window interval
        CONSTRAINT queues_breaker_window_check
        CHECK (breaker_window > interval '0' AND breaker_window <= interval '876600 hours'),
    ADD COLUMN breaker_cooldown interval
        CONSTRAINT queues_breaker_cooldown_check
        CHECK (breaker_cooldown > interval '0' AND breaker_cooldown <= interval '876600 hours'),
    ADD COLUMN breaker_probes integer NOT NULL DEFAULT 1
        CONSTRAINT queues_breaker_probes_check CHECK (breaker_probes >= 1),
    ADD CONSTRAINT queues_breaker_check
        CHECK (breaker_failures IS NULL OR (breaker_window IS NOT NULL AND breaker_cooldown IS NOT NULL));
-- Runtime state, never written by config apply. Rows exist only for queues
-- with a breaker or a rate, so a queue without controls costs nothing here.
-- The breaker's failure log: one row appended per fail of a job of a
-- breaker queue (no row is updated by every fail; docs/adr/0045), counted
-- over the window through the index and pruned by fail itself (a couple of
-- expired rows per insert).
CREATE TABLE backoff.queue_failures (
    queue     text NOT NULL,
    failed_at timestamptz NOT NULL
);
CREATE INDEX queue_failures_queue_idx ON backoff.queue_failures (queue, failed_at);
-- The breaker's state, written only on transitions (open, reopen, close)
-- and, while half open, by the claims that hand out probes. opened_at NULL
-- = closed; half open from half_open_at = opened_at + cooldown on;
-- probes_left NULL = half open and no probe handed out yet; probe_ids are
-- the jobs handed out as probes (a probe whose lease expired gives no
-- result, so when none is running any more, probing starts again).
-- Failures before counted_from do not count (they belong to an earlier
-- period).
CREATE TABLE backoff.queue_breakers (
    queue        text PRIMARY KEY,
    opened_at    timestamptz,
    half_open_at timestamptz,
    probes_left  integer,
    probe_ids    bigint[],
    counted_from timestamptz NOT NULL,
    CONSTRAINT queue_breakers_open_check CHECK ((opened_at IS NULL) = (half_open_at IS NULL))
);
-- The rate limit's token bucket, split into slots so that concurrent
-- claimers never wait for one another: slot 0 .. n-1 (n = least(16, burst))
-- holds its share of the burst (burst / n, the first burst % n slots one
-- more) and refills at the same share of the rate, lazily from p_now, by
-- the claim that locks it (FOR UPDATE SKIP LOCKED: a claimer takes the
-- free slots, never waits for a busy one). The slots together never hold
-- more than burst nor refill faster than rate. Created full by the first
-- claims of a rate-limited queue.
CREATE TABLE backoff.queue_tokens (
    queue       text NOT NULL,
    slot        smallint NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz NOT NULL,
    PRIMARY KEY (queue, slot)
);
ALTER TABLE backoff.queue_failures OWNER TO backoff_owner;
ALTER TABLE backoff.queue_breakers OWNER TO backoff_owner;
ALTER TABLE backoff.queue_tokens OWNER TO backoff_owner;
REVOKE ALL ON backoff.queue_failures, backoff.queue_breakers, backoff.queue_tokens FROM PUBLIC;
-- Workers read the state through backoff.queue_state (scoped); admins may
-- read it and delete rows (a reset: no row = closed breaker, full bucket).
GRANT SELECT, DELETE ON backoff.queue_failures, backoff.queue_breakers, backoff.queue_tokens TO backoff_admin;
-- Lease-expiry budget (docs/adr/0046): the policy key, the job's count of
-- reaped leases, and the new dead-letter reason. Existing jobs start at 0
-- and existing policies have no budget (NULL), so no job's fate changes.
-- lease_expiries has no CHECK: every CHECK is rebuilt on every row write
-- (docs/adr/0041), and only reap and replay write it.
ALTER TABLE backoff.policies
    ADD COLUMN max_lease_expiries integer
        CONSTRAINT policies_max_lease_expiries_check CHECK (max_lease_expiries >= 1);
ALTER TABLE backoff.jobs
    ADD COLUMN lease_expiries integer NOT NULL DEFAULT 0,
    DROP CONSTRAINT jobs_dead_letter_reason_check,
    ADD CONSTRAINT jobs_dead_letter_reason_check
        CHECK (dead_letter_reason IN ('max_attempts', 'non_retryable', 'deadline', 'lease_expiries'));

-- == Operator overview at a million rows (ui; docs/adr/0048) ==
-- The web UI's overview counted every status, due jobs and the last hour's
-- activity with whole-table scans (backoff.stats, the activity chart and the
-- queue list: ~1 s at 1M rows). backoff.overview and backoff.activity read
-- these instead:
-- * jobs_claimable_idx carries status (INCLUDE), so that pending and
--   retrying are counted, with due and the oldest due, by an index-only scan
--   of the live rows; claim's walk is unchanged (same key, same predicate).
--   Rebuilt here: CREATE INDEX reads the whole table under a SHARE lock
--   (writes wait, as for the other DDL of this migration); on a big table create the
--   new index CONCURRENTLY under another name beforehand and rename it.
-- * jobs_finished_idx: the finished rows by queue and completion time, for
--   the per-minute chart, the queue list (a loose scan over queue) and
--   capped exact counts. Partial: a job enters it once, when it finishes.
-- * jobs_failed_idx: the rows that ever failed by last_failed_at, for the
--   failures per minute. Partial: a job that never fails never enters it.
-- * jobs_dead_idx: dead letters and cancelled jobs by queue and id, for the
--   Jobs page filtered by those statuses (a few among millions of completed
--   ones: without it the page read the whole table to find none). Partial:
--   a job enters it when it is dead-lettered or cancelled.
-- * jobs_queue_status statistics: ANALYZE keeps the most common (queue,
--   status) pairs, so that the planner's estimate of a big queue's finished
--   rows is close (the overview shows it, marked "~", above its exact cap).
-- No update was HOT before (claim, complete, fail and heartbeat all change
-- indexed columns or predicate columns: docs/benchmarks.md), so none
-- becomes non-HOT; the cost is one more index entry when a job finishes,
-- one per update of a job that has failed before, and one when a job is
-- dead-lettered or cancelled.
DROP INDEX backoff.jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id) INCLUDE (status)
    WHERE status IN ('pending', 'retrying');
CREATE INDEX jobs_finished_idx ON backoff.jobs (queue, completed_at, id) INCLUDE (status)
    WHERE completed_at IS NOT NULL;
CREATE INDEX jobs_failed_idx ON backoff.jobs (last_failed_at)
    WHERE last_failed_at IS NOT NULL;
CREATE INDEX jobs_dead_idx ON backoff.jobs (status, queue, id)
    WHERE status IN ('dead_lettered', 'cancelled');
CREATE STATISTICS backoff.jobs_queue_status (mcv) ON queue, status FROM backoff.jobs;
ALTER STATISTICS backoff.jobs_queue_status OWNER TO backoff_owner;

-- == Dead letters page at a million rows (deadpage; docs/adr/0055) ==
-- The web UI's dead-letters page grouped every dead letter by error
-- signature (a read of each dead letter's row: ~400 ms at 50,000). It now
-- groups only the most recent ones (by completed_at, when they were
-- dead-lettered) and counts each queue's dead letters per reason exactly
-- (up to a cap) from this index alone: the (queue, reason) pairs are a
-- loose scan, each pair's count an index-only count, its first and last
-- seen one probe each, and the most recent N over every pair a merge of
-- backward index-only scans. Partial: a job enters it when it is
-- dead-lettered and leaves it when replayed (or pruned); no other update
-- touches it.
CREATE INDEX jobs_dead_letters_idx ON backoff.jobs (queue, dead_letter_reason, completed_at, id)
    WHERE status = 'dead_lettered';

-- (end of schema changes)

{{ install_snapshot "004" }}

-- == Queue-scoped privileges (grants): who reads which jobs; after the functions, which the policy calls ==
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
-- install migration 002's functions with migration 003's privileges.
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

-- Dead letters page at a million rows (deadpage).
DROP INDEX backoff.jobs_dead_letters_idx;

-- Operator overview at a million rows (ui).
DROP STATISTICS backoff.jobs_queue_status;
DROP INDEX backoff.jobs_dead_idx;
DROP INDEX backoff.jobs_failed_idx;
DROP INDEX backoff.jobs_finished_idx;
DROP INDEX backoff.jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id)
    WHERE status IN ('pending', 'retrying');

-- Queue controls (queues-sql). Version 3 knows no lease_expiries reason:
-- such dead letters read as max_attempts (their budget is spent either way).
UPDATE backoff.jobs SET dead_letter_reason = 'max_attempts' WHERE dead_letter_reason = 'lease_expiries';
ALTER TABLE backoff.jobs
    DROP CONSTRAINT jobs_dead_letter_reason_check,
    ADD CONSTRAINT jobs_dead_letter_reason_check
        CHECK (dead_letter_reason IN ('max_attempts', 'non_retryable', 'deadline')),
    DROP COLUMN lease_expiries;
ALTER TABLE backoff.policies DROP COLUMN max_lease_expiries;
DROP TABLE backoff.queue_tokens;
DROP TABLE backoff.queue_breakers;
DROP TABLE backoff.queue_failures;
ALTER TABLE backoff.queues
    DROP CONSTRAINT queues_breaker_check,
    DROP COLUMN breaker_probes,
    DROP COLUMN breaker_cooldown,
    DROP COLUMN breaker_window,
    DROP COLUMN breaker_failures,
    DROP COLUMN burst,
    DROP COLUMN rate;

-- Queue-scoped privileges (grants).
DROP TABLE backoff.queue_grants;
-- Wake-ups only for waiting workers (worker).
DROP TABLE backoff.waiting_workers;

-- Fencing tokens that never repeat (fence).
-- Migration 002's functions read attempts as the counted attempt: take the
-- uncounted claims off so that every job keeps the budget it had. The
-- tokens of running jobs change (and their tokens repeat again), so
-- downgrade with no worker running.
UPDATE backoff.jobs SET attempts = attempts - uncounted_attempts WHERE uncounted_attempts > 0;
ALTER TABLE backoff.jobs DROP COLUMN uncounted_attempts;

-- Time is not a privilege (install).
DROP TABLE backoff.settings;

-- Install hygiene (install): nothing to undo. The qualified constraints
-- mean what migration 001 meant; version 3 keeps them.

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
