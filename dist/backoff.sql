-- pgbackoff: the whole SQL in one file, generated from sql/migrations.
-- Install: psql -v ON_ERROR_STOP=1 -1 -f dist/backoff.sql "$DATABASE_URL"
-- Do not edit: run `make generate` after changing sql/.

CREATE SCHEMA backoff;

CREATE TABLE backoff.schema_migrations (version int4 NOT NULL);
INSERT INTO backoff.schema_migrations (version) VALUES (2);

-- ===== migration 1: 001_schema.sql =====

-- Tables and indexes of pgbackoff. The schema itself and tern's version table
-- (backoff.schema_migrations) are created by the migrator before this runs,
-- so that migrating down to zero keeps the version bookkeeping.

-- Named retry policies, written by `backoffctl config apply`. Durations are
-- intervals, numbers are float8 so that SQL and Go compute with the same IEEE
-- doubles (docs/adr/0004-identical-math-in-sql-and-go.md).
CREATE TABLE backoff.policies (
    name         text PRIMARY KEY CHECK (name <> ''),
    strategy     text NOT NULL DEFAULT 'exponential'
                 CHECK (strategy IN ('none', 'fixed', 'linear', 'exponential', 'polynomial', 'schedule')),
    base         interval NOT NULL DEFAULT '1 second' CHECK (base >= interval '0'),
    multiplier   float8 NOT NULL DEFAULT 2.0 CHECK (multiplier >= 1 AND multiplier <= 1000),
    exponent     integer NOT NULL DEFAULT 2 CHECK (exponent BETWEEN 1 AND 10),
    schedule     interval[] NOT NULL DEFAULT '{}',
    max_delay    interval NOT NULL DEFAULT '1 minute' CHECK (max_delay >= interval '0'),
    jitter       text NOT NULL DEFAULT 'none' CHECK (jitter IN ('none', 'full', 'equal', 'proportional')),
    jitter_ratio float8 NOT NULL DEFAULT 0.1 CHECK (jitter_ratio >= 0 AND jitter_ratio <= 1),
    max_attempts integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    lease        interval NOT NULL DEFAULT '30 seconds' CHECK (lease > interval '0'),
    deadline     interval CHECK (deadline > interval '0'),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (strategy <> 'schedule' OR cardinality(schedule) > 0)
);

-- The shipped profiles (docs/policies.md has their timelines). 'default' is
-- the policy of a queue with no mapping; it starts as a copy of 'moderate'
-- and `backoffctl config apply` rewrites it from default_policy.
INSERT INTO backoff.policies
    (name, strategy, base, multiplier, max_delay, jitter, jitter_ratio, max_attempts, lease)
VALUES
    ('aggressive',   'exponential', '100 milliseconds', 2.0, '10 seconds', 'equal',        0.1, 10, '30 seconds'),
    ('moderate',     'exponential', '1 second',         2.0, '60 seconds', 'proportional', 0.1, 5,  '30 seconds'),
    ('conservative', 'exponential', '30 seconds',       2.0, '1 hour',     'full',         0.1, 8,  '5 minutes'),
    ('default',      'exponential', '1 second',         2.0, '60 seconds', 'proportional', 0.1, 5,  '30 seconds');

-- Queue → policy mapping; a queue with no row uses the 'default' policy.
CREATE TABLE backoff.queues (
    name       text PRIMARY KEY CHECK (name <> ''),
    policy     text NOT NULL REFERENCES backoff.policies (name) ON UPDATE CASCADE,
    paused     boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE backoff.jobs (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue              text NOT NULL CHECK (queue <> ''),
    payload            jsonb NOT NULL DEFAULT '{}',
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'dead_lettered', 'cancelled')),
    priority           integer NOT NULL DEFAULT 0,
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts       integer CHECK (max_attempts >= 1),
    policy             text,
    run_at             timestamptz NOT NULL,
    lease_until        timestamptz,
    locked_by          text,
    last_attempted_at  timestamptz,
    last_failed_at     timestamptz,
    last_error         text,
    errors             jsonb NOT NULL DEFAULT '[]',
    dead_letter_reason text CHECK (dead_letter_reason IN ('max_attempts', 'non_retryable', 'deadline')),
    dedupe_key         text,
    created_at         timestamptz NOT NULL,
    completed_at       timestamptz
);

-- Claim: due jobs of one queue in claim order. Partial, so finished rows
-- (the bulk of a long-lived table) never enter it.
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id)
    WHERE status IN ('pending', 'retrying');

-- Reap: running jobs by lease expiry.
CREATE INDEX jobs_running_lease_idx ON backoff.jobs (lease_until)
    WHERE status = 'running';

-- Dedupe: one unfinished job per (queue, dedupe_key).
CREATE UNIQUE INDEX jobs_dedupe_key_idx ON backoff.jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying');

-- ===== migration 2: 002_functions.sql =====

-- Installs every public and private function of the backoff schema.
-- "unreleased" is the working copy in sql/functions; when a version is
-- released its functions are frozen into snapshots/NNN and this line names
-- that snapshot instead (docs/adr/0003-migrations-and-function-versioning.md).
-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
-- backoff.schema_version(): the migration version installed in this
-- database, so clients can refuse to run against an older schema.
CREATE OR REPLACE FUNCTION backoff.schema_version()
RETURNS integer
LANGUAGE sql
STABLE
AS $$
    SELECT version FROM backoff.schema_migrations
$$;

COMMENT ON FUNCTION backoff.schema_version() IS
'The pgbackoff migration version installed in this database. Clients compare it with the version they need and ask for `backoffctl migrate up` when it is older.';

-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- extract(epoch …) is numeric since PostgreSQL 14, so the conversion is exact.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT (extract(epoch FROM p_interval) * 1000000)::bigint
$$;

-- backoff._clamped_power(x, k): x^k for x >= 1 by binary exponentiation,
-- clamped at 2^60. Private.
--
-- Why not power(): the Go mirror must produce the same double, bit for bit.
-- pow() in C and math.Pow in Go round differently; the same sequence of IEEE
-- multiplications does not. Binary exponentiation needs at most ~62
-- multiplications for any k < 2^31, and the clamp keeps every product finite
-- (PostgreSQL raises on float8 overflow). The clamp never changes a capped
-- delay: every factor is >= 1, so once a partial product reaches 2^60 the
-- result does too, and any delay of base (>= 1 µs) × 2^60 is above every
-- allowed max. docs/adr/0004-identical-math-in-sql-and-go.md
CREATE OR REPLACE FUNCTION backoff._clamped_power(p_x float8, p_k integer)
RETURNS float8
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    c_limit CONSTANT float8 := 1152921504606846976.0;  -- 2^60
    v_result float8 := 1.0;
    v_square float8 := p_x;
    v_k integer := p_k;
BEGIN
    WHILE v_k > 0 LOOP
        IF v_k % 2 = 1 THEN
            v_result := LEAST(v_result * v_square, c_limit);
        END IF;
        v_k := v_k / 2;
        IF v_k > 0 THEN
            v_square := LEAST(v_square * v_square, c_limit);
        END IF;
    END LOOP;
    RETURN v_result;
END
$$;

-- backoff._jitter_unit(seed, attempt): the deterministic u in [0, 1) used by
-- jitter: the first 8 hex digits of md5('SEED:ATTEMPT') read as an unsigned
-- 32-bit integer, divided by 2^32 (exact in a double). Private.
CREATE OR REPLACE FUNCTION backoff._jitter_unit(p_seed bigint, p_attempt integer)
RETURNS float8
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ('x' || substr(md5(p_seed::text || ':' || p_attempt::text), 1, 8))::bit(32)::bigint::float8
           / 4294967296.0::float8
$$;

-- backoff._delay_us(...): the backoff delay in microseconds for failed
-- attempt p_attempt (1-based) under explicit policy parameters, jitter
-- included. Private: the one implementation of DESIGN §5 that every other
-- function calls. Durations are microseconds (bigint); arithmetic is in
-- float8, in the same order as the Go mirror (client/policy), so both give
-- the same result to the microsecond.
CREATE OR REPLACE FUNCTION backoff._delay_us(
    p_strategy     text,
    p_base_us      bigint,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule_us  bigint[],
    p_max_us       bigint,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint
)
RETURNS bigint
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_delay float8;
    v_max   float8 := p_max_us::float8;
    v_len   integer;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got %', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 THEN
        RAISE EXCEPTION 'base must not be negative, got % µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 THEN
        RAISE EXCEPTION 'max must not be negative, got % µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        IF p_multiplier IS NULL OR p_multiplier = 'NaN'::float8 OR p_multiplier < 1 OR p_multiplier > 1000 THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got %', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got %', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_schedule_us[LEAST(p_attempt, v_len)]::float8;
        IF v_delay IS NULL OR v_delay < 0 THEN
            RAISE EXCEPTION 'schedule entries must not be negative, got %', coalesce(v_delay::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    v_delay := LEAST(v_delay, v_max);

    IF p_jitter IS DISTINCT FROM 'none' THEN
        v_u := backoff._jitter_unit(p_seed, p_attempt);
    END IF;
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL OR p_jitter_ratio = 'NaN'::float8 OR p_jitter_ratio < 0 OR p_jitter_ratio > 1 THEN
            RAISE EXCEPTION 'jitter_ratio must be between 0 and 1, got %', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    RETURN floor(v_delay)::bigint;
END
$$;

-- backoff._policy_delay_us(policy row, attempt, seed): _delay_us with the
-- parameters of a policies row. Private; shared by retry_delay, schedule and
-- the retry-or-dead-letter decision.
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy  backoff.policies,
    p_attempt integer,
    p_seed    bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT backoff._delay_us(
        (p_policy).strategy,
        backoff._interval_us((p_policy).base),
        (p_policy).multiplier,
        (p_policy).exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest((p_policy).schedule) AS s),
        backoff._interval_us((p_policy).max_delay),
        (p_policy).jitter,
        (p_policy).jitter_ratio,
        p_attempt,
        p_seed)
$$;

-- backoff.retry_delay(policy, attempt, seed): the delay before the retry
-- that follows failed attempt p_attempt (1-based) under a named policy,
-- jitter included, deterministic from p_seed (normally the job id).
CREATE OR REPLACE FUNCTION backoff.retry_delay(
    p_policy  text,
    p_attempt integer,
    p_seed    bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    SELECT * INTO v_policy FROM backoff.policies WHERE name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN backoff._policy_delay_us(v_policy, p_attempt, coalesce(p_seed, 0)) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.retry_delay(text, integer, bigint) IS
'Delay before the retry that follows failed attempt p_attempt (1-based) under the named policy, jitter included and deterministic from p_seed (normally the job id). Raises 22023 for an unknown policy or an attempt below 1.
Example: SELECT backoff.retry_delay(''moderate'', 3, 42);';
