-- Round 2: the schema changes of DESIGN §11, then the working copy of every
-- function (snapshot "unreleased", sql/functions), then their privileges.
-- Round 1's functions stay frozen in snapshots/002 (migration 002), so this
-- is the only migration that installs "unreleased" (docs/adr/0003).
--
-- Each section below belongs to one change; its down counterpart is in the
-- same order, reversed, after the marker.

-- == Schema changes (one section per change; added by the round-2 work) ==

-- == Install hygiene (install; DESIGN §11.4, docs/adr/0036) ==
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

-- == Time is not a privilege (install; DESIGN §11.2, docs/adr/0035) ==
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
-- function's return type, so round 1's PL/pgSQL version is dropped first
-- (no object depends on it: fail and reap call it by name at run time and
-- are replaced below).
DROP FUNCTION IF EXISTS backoff._retry_decision(
    backoff.policies, bigint, integer, integer, timestamptz, timestamptz, interval, boolean, timestamptz);

-- == Fencing tokens that never repeat (fence; DESIGN §11.1, docs/adr/0020) ==
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
                       'retry_delay', 'compute_delay', 'schedule', 'calculate_step_next_retry_time'))
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

-- Fencing tokens that never repeat (fence).
-- Round 1's functions read attempts as the counted attempt: take the
-- uncounted claims off so that every job keeps the budget it had. The
-- tokens of running jobs change (and round 1's tokens repeat again), so
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
