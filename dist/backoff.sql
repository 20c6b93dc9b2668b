-- pgbackoff 0.1.0: the whole SQL in one file, generated from sql/migrations.
-- Install: psql -v ON_ERROR_STOP=1 -1 -f dist/backoff.sql "$DATABASE_URL"
-- Do not edit: run `make generate` after changing sql/.
-- Sources: sha256 82524838ff3ce71f688865fc45709ac09fb84e187dec00aa6052fd74e163db4d

CREATE SCHEMA backoff;

SET search_path = pg_catalog;

CREATE TABLE backoff.schema_migrations (version int4 NOT NULL);
INSERT INTO backoff.schema_migrations (version) VALUES (5);

-- ===== migration 1: 001_schema.sql =====

-- Tables and indexes of pgbackoff. The schema itself and tern's version table
-- (backoff.schema_migrations) are created by the migrator before this runs,
-- so that migrating down to zero keeps the version bookkeeping.

-- Named retry policies, written by `backoffctl config apply`. Durations are
-- intervals, numbers are float8 so that SQL and Go compute with the same IEEE
-- doubles (docs/adr/0004-identical-math-in-sql-and-go.md). The limits are
-- those of backoff._delay_us and of the Go mirror's Policy.Validate: delays
-- up to 100 years (876600 hours: years of 365.25 days, written in hours
-- because interval comparison counts a year as 360 days) keep every
-- microsecond count exact in a double (< 2^53),
-- and a jitter ratio is 0 or at least a millionth, because a smaller one
-- underflows float8 (PostgreSQL raises where Go would silently give 0).
CREATE TABLE backoff.policies (
    name         text PRIMARY KEY CHECK (name <> ''),
    strategy     text NOT NULL DEFAULT 'exponential'
                 CHECK (strategy IN ('none', 'fixed', 'linear', 'exponential', 'polynomial', 'schedule')),
    base         interval NOT NULL DEFAULT '1 second'
                 CHECK (base >= interval '0' AND base <= interval '876600 hours'),
    multiplier   float8 NOT NULL DEFAULT 2.0 CHECK (multiplier >= 1 AND multiplier <= 1000),
    exponent     integer NOT NULL DEFAULT 2 CHECK (exponent BETWEEN 1 AND 10),
    schedule     interval[] NOT NULL DEFAULT '{}'
                 CHECK (array_position(schedule, NULL) IS NULL
                        AND interval '0' <= ALL (schedule) AND interval '876600 hours' >= ALL (schedule)),
    max_delay    interval NOT NULL DEFAULT '1 minute'
                 CHECK (max_delay >= interval '0' AND max_delay <= interval '876600 hours'),
    jitter       text NOT NULL DEFAULT 'none' CHECK (jitter IN ('none', 'full', 'equal', 'proportional')),
    jitter_ratio float8 NOT NULL DEFAULT 0.1
                 CHECK (jitter_ratio = 0 OR (jitter_ratio >= 0.000001 AND jitter_ratio <= 1)),
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
    completed_at       timestamptz,
    -- A lease exists exactly while a job runs. Reap's index relies on it.
    CONSTRAINT jobs_lease_while_running CHECK ((status = 'running') = (lease_until IS NOT NULL))
);

-- Claim: due jobs of one queue in claim order. Partial, so finished rows
-- (the bulk of a long-lived table) never enter it.
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id)
    WHERE status IN ('pending', 'retrying');

-- Reap: running jobs by lease expiry. The predicate is on lease_until (set
-- exactly while running, see the CHECK above) rather than on status, so that
-- only reap's "lease_until < now" can use this index: with "WHERE status =
-- 'running'" a generic plan of the fenced updates (complete, complete_many,
-- fail: "id = $1 AND status = 'running'") may walk every running row here
-- instead of probing the primary key.
CREATE INDEX jobs_lease_idx ON backoff.jobs (lease_until)
    WHERE lease_until IS NOT NULL;

-- Dedupe: one unfinished job per (queue, dedupe_key).
CREATE UNIQUE INDEX jobs_dedupe_key_idx ON backoff.jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying');

-- ===== migration 2: 002_functions.sql =====

-- Installs every public and private function of the backoff schema as
-- released with schema version 3 (round 1), frozen in snapshots/002 so this
-- migration never changes meaning (docs/adr/0003-migrations-and-function-versioning.md).
-- Later function changes are installed by migration 004.
-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
-- backoff.schema_version(): the migration version installed in this
-- database, so clients can refuse to run against an older schema.
CREATE OR REPLACE FUNCTION backoff.schema_version()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT version FROM backoff.schema_migrations
$$;

COMMENT ON FUNCTION backoff.schema_version() IS
'The pgbackoff migration version installed in this database. Clients compare it with the version they need and ask for `backoffctl migrate up` when it is older.';

-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- A month counts as 30 days and a day as 24 hours: the linearization
-- PostgreSQL's interval comparison uses, so a CHECK such as
-- "base <= interval '876600 hours'" and this conversion agree. (extract(epoch)
-- alone would count a year as 365.25 days but compare it as 360.) Exact: the
-- months are taken out before extract(epoch …), which is numeric.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ((extract(year FROM p_interval) * 12 + extract(month FROM p_interval)) * 2592000000000
            + extract(epoch FROM p_interval - make_interval(years => extract(year FROM p_interval)::integer,
                                                            months => extract(month FROM p_interval)::integer)) * 1000000
           )::bigint
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
-- result does too, and any delay of base (>= 1 µs) × 2^60 µs (36,559 years)
-- is above every allowed max (100 years). docs/adr/0004-identical-math-in-sql-and-go.md
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
-- float8, one operator at a time, in the same order as the Go mirror
-- (client/policy/delay.go), so both give the same result to the microsecond
-- (docs/adr/0004-identical-math-in-sql-and-go.md). Change one, change both,
-- and the shared vectors (client/policy/testdata/vectors.json) tell.
--
-- Limits (the same as the policies table's CHECKs and Policy.Validate):
-- durations 0..100 years (3155760000000000 µs, below 2^53 so exact in a
-- double), multiplier 1..1000, exponent 1..10, jitter_ratio 0 or
-- 0.000001..1 (a smaller ratio underflows float8, which PostgreSQL raises).
-- A NULL seed is seed 0.
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
    c_limit_us CONSTANT bigint := 3155760000000000;  -- 100 years
    v_delay float8;
    v_max   float8;
    v_len   integer;
    v_entry bigint;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got "%"', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 OR p_base_us > c_limit_us THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%" µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 OR p_max_us > c_limit_us THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%" µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_max := p_max_us::float8;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        -- NaN compares above every number in PostgreSQL, so "> 1000" rejects it.
        IF p_multiplier IS NULL OR NOT (p_multiplier >= 1 AND p_multiplier <= 1000) THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got "%"', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got "%"', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_entry := p_schedule_us[LEAST(p_attempt, v_len)];
        IF v_entry IS NULL OR v_entry < 0 OR v_entry > c_limit_us THEN
            RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%" µs', coalesce(v_entry::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := v_entry::float8;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    -- The cap.
    v_delay := LEAST(v_delay, v_max);

    -- Jitter, with u from md5('SEED:ATTEMPT'). Each float8 operator rounds on
    -- its own; Go converts explicitly to stop fused multiply-add.
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL
           OR NOT (p_jitter_ratio = 0 OR (p_jitter_ratio >= 0.000001 AND p_jitter_ratio <= 1)) THEN
            RAISE EXCEPTION 'jitter_ratio must be 0 or between 0.000001 and 1, got "%"', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    -- Whole microseconds, rounded down: never above the cap.
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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- backoff.compute_delay(...): the backoff delay of DESIGN §5 for explicit
-- policy parameters, no table involved: pure and IMMUTABLE, so it can be
-- used in indexes, generated columns, and by callers that keep their policy
-- elsewhere. Parameters a strategy or jitter does not use are ignored.
CREATE OR REPLACE FUNCTION backoff.compute_delay(
    p_strategy     text,
    p_base         interval,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule     interval[],
    p_max          interval,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_limit CONSTANT interval := interval '876600 hours';  -- 100 years of 365.25 days
    v_entry interval;
BEGIN
    -- Intervals are checked before they become microseconds: a huge interval
    -- would otherwise fail as a bigint overflow instead of a clear 22023.
    IF p_base IS NULL OR p_base < interval '0' OR p_base > c_limit THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%"', coalesce(p_base::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max IS NULL OR p_max < interval '0' OR p_max > c_limit THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%"', coalesce(p_max::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_strategy = 'schedule' THEN
        FOREACH v_entry IN ARRAY coalesce(p_schedule, '{}') LOOP
            IF v_entry IS NULL OR v_entry < interval '0' OR v_entry > c_limit THEN
                RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%"', coalesce(v_entry::text, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    RETURN backoff._delay_us(
        p_strategy,
        backoff._interval_us(p_base),
        p_multiplier,
        p_exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest(p_schedule) AS s),
        backoff._interval_us(p_max),
        p_jitter,
        p_jitter_ratio,
        p_attempt,
        p_seed) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.compute_delay(text, interval, float8, integer, interval[], interval, text, float8, integer, bigint) IS
'Backoff delay before the retry that follows failed attempt p_attempt (1-based), from explicit policy parameters: strategy none|fixed|linear|exponential|polynomial|schedule, then the cap p_max, then jitter none|full|equal|proportional with u from md5(''SEED:ATTEMPT''). Pure and IMMUTABLE; identical to the Go mirror (client/policy) to the microsecond. Raises 22023 naming the bad parameter. docs/policies.md has the formulas.
Example: SELECT backoff.compute_delay(''exponential'', ''1 second'', 2.0, 2, ''{}'', ''1 minute'', ''proportional'', 0.1, 3, 42);';

-- backoff.schedule(policy, attempts, seed): the retry timeline of a named
-- policy, one row per failed attempt: the delay before the next try (jitter
-- included, from p_seed) and the cumulative wait since the first failure.
-- Every row comes from backoff._policy_delay_us, the function fail and reap
-- use, so the timeline is what jobs will really do.
CREATE OR REPLACE FUNCTION backoff.schedule(
    p_policy   text,
    p_attempts integer DEFAULT 10,
    p_seed     bigint DEFAULT 0
)
RETURNS TABLE (attempt integer, delay interval, cumulative interval)
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    -- 1000 rows of at most 100 years each stay inside interval's range.
    IF p_attempts IS NULL OR p_attempts < 1 OR p_attempts > 1000 THEN
        RAISE EXCEPTION 'attempts must be between 1 and 1000, got "%"', coalesce(p_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT g.n, d.v_delay, sum(d.v_delay) OVER (ORDER BY g.n)
        FROM generate_series(1, p_attempts) AS g(n)
        CROSS JOIN LATERAL (
            SELECT backoff._policy_delay_us(v_policy, g.n, coalesce(p_seed, 0)) * interval '1 microsecond' AS v_delay
        ) AS d
        ORDER BY g.n;
END
$$;

COMMENT ON FUNCTION backoff.schedule(text, integer, bigint) IS
'The retry timeline of the named policy: for failed attempts 1..p_attempts (at most 1000), the delay before the next try (jitter included, deterministic from p_seed, as for a job whose id is p_seed) and the cumulative wait. What an operator reads before choosing a policy; backoffctl schedule prints the same numbers. Raises 22023 for an unknown policy.
Example: SELECT * FROM backoff.schedule(''moderate'', 5, 42);';

-- backoff._step_backoff(request, attempts, max, multiplier): validates the
-- parameters of calculate_step_next_retry_time and returns the delay of its
-- fallback path, LEAST(multiplier^attempts seconds, max seconds). Private;
-- shared by the timestamptz and timestamp overloads.
--
-- tasker-core's expression power(multiplier, attempts) overflows numeric
-- (and float8) for large attempts. Here the cap is decided before any
-- exponentiation: when attempts × ln(multiplier) exceeds ln(max) + 1, the
-- power is above e × max and the result is max; the margin of 1 is far wider
-- than any float8 rounding of the logarithms. Otherwise the power is at most
-- about 2.7 × max (≤ 5.9e9) and is computed with the original expression,
-- so every result the original could compute comes out the same: numeric
-- power, then PostgreSQL's interval multiplication, which rounds fractional
-- seconds to the nearest microsecond (1.1^3 → 1.331 s).
--
-- attempts NULL follows the original too: LEAST ignores the NULL power, so
-- the delay is max.
CREATE OR REPLACE FUNCTION backoff._step_backoff(
    p_request_seconds integer,
    p_attempts        integer,
    p_max_seconds     integer,
    p_multiplier      numeric
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_max interval;
BEGIN
    IF p_request_seconds < 0 THEN
        RAISE EXCEPTION 'backoff_request_seconds must not be negative, got "%"', p_request_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempts < 0 THEN
        RAISE EXCEPTION 'attempts must not be negative, got "%"', p_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_seconds IS NULL OR p_max_seconds <= 0 THEN
        RAISE EXCEPTION 'p_max_backoff_seconds must be positive, got "%"', coalesce(p_max_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- NaN is neither < 1 nor finite; 'Infinity' is not finite.
    IF p_multiplier IS NULL OR p_multiplier = 'NaN'::numeric OR p_multiplier = 'Infinity'::numeric
       OR p_multiplier < 1 THEN
        RAISE EXCEPTION 'p_backoff_multiplier must be a finite number of at least 1, got "%"', coalesce(p_multiplier::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_max := p_max_seconds * interval '1 second';
    IF p_attempts IS NULL THEN
        RETURN v_max;
    END IF;
    IF p_attempts > 0 AND p_multiplier > p_max_seconds THEN
        RETURN v_max;  -- multiplier^attempts >= multiplier > max (and ln needs no huge float8)
    END IF;
    IF p_attempts::float8 * ln(p_multiplier::float8) > ln(p_max_seconds::float8) + 1 THEN
        RETURN v_max;
    END IF;
    RETURN LEAST(power(p_multiplier, p_attempts::numeric) * interval '1 second', v_max);
END
$$;

-- backoff.calculate_step_next_retry_time(...): tasker-core's dual-path rule
-- (TAS-57), drop-in, with its parameter names and defaults: an explicit
-- request (backoff_request_seconds after last_attempted_at) wins; otherwise
-- failure_time + LEAST(multiplier^attempts seconds, max seconds); otherwise
-- NULL. Unlike the original it never overflows (attempts up to 2^31-1), and
-- rejects invalid parameters with 22023 whichever path applies. Fractional
-- seconds of the power are kept to the microsecond (rounded to nearest, as
-- the original expression does). The timestamp overload serves users of the
-- original's timestamp-without-time-zone columns.
CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamptz,
    failure_time            timestamptz,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamp,
    failure_time            timestamp,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamptz, timestamptz, integer, integer, numeric) IS
'tasker-core''s dual-path retry time: last_attempted_at + backoff_request_seconds when both are given; else failure_time + LEAST(p_backoff_multiplier^attempts, p_max_backoff_seconds) seconds (fractions kept to the microsecond); else NULL. Never overflows, for any attempts up to 2^31-1. Raises 22023 naming the parameter for negative attempts or backoff_request_seconds, p_max_backoff_seconds <= 0, p_backoff_multiplier < 1, NaN or infinite.
Example: SELECT backoff.calculate_step_next_retry_time(NULL, NULL, ''2025-01-01 00:00:00+00'', 3);  -- 00:00:08';

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamp, timestamp, integer, integer, numeric) IS
'The timestamp-without-time-zone overload of calculate_step_next_retry_time, for drop-in users of tasker-core''s original: same rule, same errors.
Example: SELECT backoff.calculate_step_next_retry_time(30, ''2025-01-01 00:00:00'', NULL, 0);  -- 00:00:30';

-- backoff._iso8601(at): a timestamptz as ISO 8601 in UTC with microseconds
-- ("2026-01-02T03:04:05.000006Z"), whatever the session's TimeZone. Private;
-- used for the error history and for BK004's DETAIL, which clients parse.
CREATE OR REPLACE FUNCTION backoff._iso8601(p_at timestamptz)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- backoff._push_error(errors, attempt, at, error, worker, kind): the job's
-- error history with one entry appended, keeping the 20 most recent entries
-- (the oldest are dropped). Entries are objects
-- {"attempt", "at" (ISO 8601 UTC), "error", "worker", "kind"} with kind
-- 'error' (a handler's failure) or 'lease_expired' (reaped). Private; used by
-- fail and reap. One expression, so PostgreSQL inlines it into the UPDATE.
CREATE OR REPLACE FUNCTION backoff._push_error(
    p_errors  jsonb,
    p_attempt integer,
    p_at      timestamptz,
    p_error   text,
    p_worker  text,
    p_kind    text
)
RETURNS jsonb
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT jsonb_path_query_array(p_errors, '$[last - 18 to last]')
        || jsonb_build_array(jsonb_build_object(
               'attempt', p_attempt,
               'at', backoff._iso8601(p_at),
               'error', p_error,
               'worker', p_worker,
               'kind', p_kind))
$$;

-- backoff._job_policy(policy, queue): the policy row that governs a job:
-- the job's own policy, else its queue's (backoff.queues), else 'default'.
-- A name with no row (a policy deleted after the job was enqueued) falls
-- through to the next candidate, so a job is never stuck for want of a
-- policy; with no 'default' row either it raises 22023. Private; PL/pgSQL so
-- that its plans are cached (docs/adr/0008-single-retry-decision.md).
CREATE OR REPLACE FUNCTION backoff._job_policy(p_policy text, p_queue text)
RETURNS backoff.policies
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    IF p_policy IS NOT NULL THEN
        SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
        IF FOUND THEN
            RETURN v_policy;
        END IF;
    END IF;
    SELECT p.* INTO v_policy
    FROM backoff.queues AS q
    JOIN backoff.policies AS p ON p.name = q.policy
    WHERE q.name = p_queue;
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = 'default';
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    RAISE EXCEPTION 'unknown policy "%" and no "default" policy', coalesce(p_policy, 'NULL')
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- backoff._retry_decision(...): THE decision "retry at T, or dead-letter
-- with a reason" for a failed attempt. It exists once: fail (one row) and
-- reap (a batch of expired leases) both call it inside their UPDATE, so a
-- reported failure and a silent crash are judged identically
-- (docs/adr/0008-single-retry-decision.md). Pure: everything it needs is a
-- parameter, time included.
--
-- In order:
--   not p_retryable                          -> dead_lettered, 'non_retryable'
--   p_attempts >= max attempts               -> dead_lettered, 'max_attempts'
--   next run after created_at + deadline     -> dead_lettered, 'deadline'
--   otherwise                                -> retrying at the next run
-- where max attempts = coalesce(p_max_attempts, policy.max_attempts) and the
-- next run = p_now + (p_retry_in clamped to policy.max_delay when given,
-- else the policy's delay for attempt p_attempts seeded by the job id).
-- A dead letter keeps its run_at and gets completed_at = p_now.
CREATE OR REPLACE FUNCTION backoff._retry_decision(
    p_policy       backoff.policies,
    p_job_id       bigint,
    p_attempts     integer,
    p_max_attempts integer,
    p_created_at   timestamptz,
    p_run_at       timestamptz,
    p_retry_in     interval,
    p_retryable    boolean,
    p_now          timestamptz,
    OUT status             text,
    OUT run_at             timestamptz,
    OUT dead_letter_reason text,
    OUT completed_at       timestamptz
)
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_next timestamptz;
BEGIN
    IF NOT p_retryable THEN
        dead_letter_reason := 'non_retryable';
    ELSIF p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN
        dead_letter_reason := 'max_attempts';
    ELSE
        IF p_retry_in IS NULL THEN
            v_next := p_now + backoff._policy_delay_us(p_policy, p_attempts, p_job_id) * interval '1 microsecond';
        ELSE
            v_next := p_now + least(p_retry_in, (p_policy).max_delay);
        END IF;
        IF (p_policy).deadline IS NOT NULL AND v_next > p_created_at + (p_policy).deadline THEN
            dead_letter_reason := 'deadline';
        ELSE
            status := 'retrying';
            run_at := v_next;
            RETURN;
        END IF;
    END IF;
    status := 'dead_lettered';
    run_at := p_run_at;
    completed_at := p_now;
END
$$;

-- backoff._raise_fencing_error(action, job id, attempt): raises the error
-- for a guarded UPDATE on a running attempt (complete, fail, heartbeat,
-- snooze) that matched no row. It runs only after that UPDATE, so it reads
-- the row as it is now and never decides before writing:
--   NULL id or attempt, attempt < 1     -> 22023
--   no such job                         -> BK001
--   completed, dead_lettered, cancelled -> BK003
--   otherwise (pending, retrying, or running another attempt) -> BK002
-- Private. Always raises.
CREATE OR REPLACE FUNCTION backoff._raise_fencing_error(
    p_action  text,
    p_job_id  bigint,
    p_attempt integer
)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_status   text;
    v_attempts integer;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot % job "NULL": job id must not be null', p_action
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'cannot % job "%": attempt must be at least 1, got "%"',
            p_action, p_job_id, coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.status, j.attempts INTO v_status, v_attempts
    FROM backoff.jobs AS j
    WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    IF v_status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot % job "%": it is "%"', p_action, p_job_id, v_status
            USING ERRCODE = 'BK003';
    END IF;
    IF v_status = 'running' THEN
        RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is running attempt "%"',
            p_action, p_job_id, p_attempt, v_attempts
            USING ERRCODE = 'BK002';
    END IF;
    RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is "%" after attempt "%"',
        p_action, p_job_id, p_attempt, v_status, v_attempts
        USING ERRCODE = 'BK002';
END
$$;

-- backoff._valid_span(interval): true for NULL or a finite interval of at
-- most 876600 hours (100 years of 365.25 days, the bound of every policy
-- duration). Private. Leases, delays and windows beyond it would push a
-- timestamp out of PostgreSQL's range (22008) or, on PostgreSQL 17 where
-- intervals can be infinite, leave a lease that never expires; the callers
-- refuse them with 22023 instead.
CREATE OR REPLACE FUNCTION backoff._valid_span(p_value interval)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_value IS NULL
        OR (pg_catalog.isfinite(p_value) AND p_value <= interval '876600 hours' AND p_value >= interval '-876600 hours')
$$;

-- backoff.enqueue(queue, payload, run_at, max_attempts, priority, dedupe_key,
-- now, policy): insert a job and return its id. The job records p_policy,
-- else the policy of its queue at this moment
-- (docs/adr/0008-single-retry-decision.md). p_policy follows p_now, against
-- the p_now-last convention, so that positional calls written before it
-- existed keep their meaning (DESIGN §4: optional parameters at the end). A dedupe
-- key that matches an unfinished job of the same queue returns that job's
-- id and inserts nothing. A job due now wakes listeners of channel
-- 'backoff_jobs' (payload: the queue name); PostgreSQL delivers identical
-- notifications of one transaction once, so a bulk enqueue sends one per
-- queue.
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queue        text,
    p_payload      jsonb DEFAULT '{}',
    p_run_at       timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL,
    p_priority     integer DEFAULT 0,
    p_dedupe_key   text DEFAULT NULL,
    p_now          timestamptz DEFAULT now(),
    p_policy       text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id     bigint;
    v_run_at timestamptz := coalesce(p_run_at, p_now);
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_now IS NULL OR p_now = 'infinity' OR p_now = '-infinity' THEN
        RAISE EXCEPTION 'now must be a finite time, got "%"', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_run_at = 'infinity' OR p_run_at = '-infinity' THEN
        RAISE EXCEPTION 'run_at must be a finite time, got "%"', p_run_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_dedupe_key = '' THEN
        RAISE EXCEPTION 'dedupe key must be NULL or non-empty, got ""'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_policy IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM backoff.policies AS p WHERE p.name = p_policy) THEN
        RAISE EXCEPTION 'unknown policy "%"', p_policy
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR v_try IN 1..10 LOOP
        IF p_dedupe_key IS NULL THEN
            INSERT INTO backoff.jobs (queue, payload, priority, max_attempts, policy, run_at, created_at)
            VALUES (p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts,
                    coalesce(p_policy, (SELECT q.policy FROM backoff.queues AS q WHERE q.name = p_queue), 'default'),
                    v_run_at, p_now)
            RETURNING id INTO v_id;
        ELSE
            INSERT INTO backoff.jobs (queue, payload, priority, max_attempts, policy, run_at, created_at, dedupe_key)
            VALUES (p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts,
                    coalesce(p_policy, (SELECT q.policy FROM backoff.queues AS q WHERE q.name = p_queue), 'default'),
                    v_run_at, p_now, p_dedupe_key)
            ON CONFLICT (queue, dedupe_key)
                WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying')
                DO NOTHING
            RETURNING id INTO v_id;
        END IF;
        IF v_id IS NOT NULL THEN
            IF v_run_at <= p_now THEN
                PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
            END IF;
            RETURN v_id;
        END IF;
        -- The key is taken by an unfinished job: return it. If that job
        -- finished between the INSERT and this SELECT, insert again.
        SELECT j.id INTO v_id
        FROM backoff.jobs AS j
        WHERE j.queue = p_queue AND j.dedupe_key = p_dedupe_key
          AND j.status IN ('pending', 'running', 'retrying');
        IF v_id IS NOT NULL THEN
            RETURN v_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'enqueue in queue "%": dedupe key "%" kept changing hands', p_queue, p_dedupe_key
        USING ERRCODE = 'serialization_failure';
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text, jsonb, timestamptz, integer, integer, text, timestamptz, text) IS
'Insert a job into p_queue and return its id. p_payload (jsonb, NULL = {}), p_run_at (first run; NULL = p_now), p_max_attempts (NULL = the policy''s), p_priority (higher first; NULL = 0), p_dedupe_key (while a job of this queue with that key is pending, running or retrying, return its id and insert nothing), p_now (created_at), p_policy (the policy of this job; NULL = its queue''s, from backoff.queues, else ''default''; it comes after p_now so that positional calls keep working, so pass it by name). The job records that policy: remapping the queue later does not change it. A deduplicated call returns the existing job unchanged, whatever p_policy says. A job due now notifies channel backoff_jobs with the queue name as payload, once per transaction and queue.
Errors: 22023 for a NULL or empty queue, max_attempts < 1, an empty dedupe key, a NULL or infinite now, an infinite run_at, a p_policy that names no row of backoff.policies.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT backoff.enqueue(''reports'', p_policy => ''conservative'');
SELECT id, queue, policy FROM backoff.jobs ORDER BY id;';

-- backoff.enqueue(queues[], payloads[], run_ats[], max_attempts[],
-- priorities[], dedupe_keys[], now, policies[]): the bulk form, element i of every
-- array describing job i; returns the ids in input order. It has exactly
-- the single-job form's semantics, but a batch without dedupe keys is
-- inserted by ONE set-based INSERT instead of one INSERT per job (about 5x
-- fewer server cycles per job; docs/adr/0016-set-based-bulk-enqueue.md). A
-- batch with a dedupe key goes through the single-job form element by
-- element, which handles the key's conflicts and races. The ids are drawn
-- from the identity sequence before the INSERT so that each one is tied to
-- its element whatever order the rows are inserted in.
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queues       text[],
    p_payloads     jsonb[],
    p_run_ats      timestamptz[],
    p_max_attempts integer[],
    p_priorities   integer[],
    p_dedupe_keys  text[],
    p_now          timestamptz DEFAULT now(),
    p_policies     text[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n integer := coalesce(cardinality(p_queues), 0);
BEGIN
    IF p_queues IS NULL
       OR coalesce(cardinality(p_payloads), v_n) <> v_n OR coalesce(cardinality(p_run_ats), v_n) <> v_n
       OR coalesce(cardinality(p_max_attempts), v_n) <> v_n OR coalesce(cardinality(p_priorities), v_n) <> v_n
       OR coalesce(cardinality(p_dedupe_keys), v_n) <> v_n OR coalesce(cardinality(p_policies), v_n) <> v_n THEN
        RAISE EXCEPTION 'enqueue: the arrays must not be null (queues) and must have the same length, got "%" queues', coalesce(v_n::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_dedupe_keys IS NOT NULL AND EXISTS (SELECT FROM unnest(p_dedupe_keys) AS k WHERE k IS NOT NULL) THEN
        RETURN QUERY
        SELECT backoff.enqueue(t.queue, t.payload, t.run_at, t.max_attempts, t.priority, t.dedupe_key, p_now, t.policy)
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, dedupe_key, policy, ord)
        ORDER BY t.ord;
        RETURN;
    END IF;
    IF p_now IS NULL OR p_now = 'infinity' OR p_now = '-infinity' THEN
        RAISE EXCEPTION 'now must be a finite time, got "%"', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(p_queues, NULL) IS NOT NULL OR array_position(p_queues, '') IS NOT NULL THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"',
            coalesce(p_queues[array_position(p_queues, '')], 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_attempts IS NOT NULL AND EXISTS (SELECT FROM unnest(p_max_attempts) AS m WHERE m < 1) THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"',
            (SELECT min(m) FROM unnest(p_max_attempts) AS m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_run_ats IS NOT NULL AND EXISTS (SELECT FROM unnest(p_run_ats) AS r WHERE r IN ('infinity', '-infinity')) THEN
        RAISE EXCEPTION 'run_at must be a finite time, got "%"',
            (SELECT r FROM unnest(p_run_ats) AS r WHERE r IN ('infinity', '-infinity') LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_policies IS NOT NULL AND EXISTS (
            SELECT FROM unnest(p_policies) AS n
            WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n)) THEN
        RAISE EXCEPTION 'unknown policy "%"',
            (SELECT n FROM unnest(p_policies) AS n
             WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n) LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    RETURN QUERY
    WITH src AS MATERIALIZED (
        SELECT t.ord, pg_catalog.nextval('backoff.jobs_id_seq'::regclass) AS id,
               t.queue, t.payload, coalesce(t.run_at, p_now) AS run_at, t.max_attempts, t.priority, t.policy
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, policy, ord)
    ), ins AS (
        INSERT INTO backoff.jobs (id, queue, payload, priority, max_attempts, policy, run_at, created_at)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.queue, coalesce(s.payload, '{}'), coalesce(s.priority, 0), s.max_attempts,
               coalesce(s.policy, q.policy, 'default'), s.run_at, p_now
        FROM src AS s
        LEFT JOIN backoff.queues AS q ON q.name = s.queue
    )
    SELECT s.id FROM src AS s ORDER BY s.ord;

    PERFORM pg_catalog.pg_notify('backoff_jobs', d.queue)
    FROM (SELECT DISTINCT t.queue
          FROM unnest(p_queues, p_run_ats) AS t(queue, run_at)
          WHERE coalesce(t.run_at, p_now) <= p_now) AS d;
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text[], jsonb[], timestamptz[], integer[], integer[], text[], timestamptz, text[]) IS
'Bulk enqueue: insert one job per element of p_queues (element i of p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys and p_policies goes with it; every array but p_policies is required, a NULL array means all NULL; a call with only NULLs after the queues needs a cast or named arguments to pick this form) and return the ids in input order. Each job gets exactly what backoff.enqueue(p_queue, ...) would give it, dedupe included; a batch without dedupe keys is one set-based INSERT. Atomic: on error no job is added. Notifies channel backoff_jobs once per queue with a job due now.
Errors: 22023 for a NULL p_queues, arrays of different lengths, a NULL or empty queue, a max_attempts < 1, an empty dedupe key, a NULL or infinite now, an infinite run_at, a policy that names no row of backoff.policies.
Example:
SELECT * FROM backoff.enqueue(ARRAY[''emails'', ''emails'', ''sms''], ARRAY[''{"to": "a"}'', ''{"to": "b"}'', NULL]::jsonb[],
                              NULL, NULL, ARRAY[0, 5, 0], NULL);';

-- backoff.claim(queue, worker, limit, lease, now): claim up to p_limit due
-- jobs of a queue in one UPDATE. The candidates are locked with
-- FOR UPDATE SKIP LOCKED, so concurrent claimers never wait for, nor share,
-- a row. Hot path: one statement, no extra queries.
--
-- Plan notes (docs/design.md §10): the candidates are collected into an
-- array (an InitPlan) and the UPDATE finds them with id = ANY(array) on the
-- primary key. The usual id IN (SELECT ... LIMIT p_limit FOR UPDATE SKIP
-- LOCKED) can get a generic plan that hash-joins a sequential scan of the
-- whole table. The lease comes from the job's recorded policy by primary
-- key; backoff._job_policy is the fallback for a job whose policy is NULL or
-- deleted. A paused queue (backoff.queues.paused) gives nothing.
CREATE OR REPLACE FUNCTION backoff.claim(
    p_queue  text,
    p_worker text,
    p_limit  integer DEFAULT 1,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL OR p_queue = '' OR p_worker IS NULL OR p_limit IS NULL OR p_limit < 1
       OR p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) OR (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        IF p_queue IS NULL OR p_queue = '' THEN
            RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_worker IS NULL THEN
            RAISE EXCEPTION 'claim in queue "%": worker must not be null', p_queue
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_limit IS NULL OR p_limit < 1 THEN
            RAISE EXCEPTION 'claim in queue "%": limit must be at least 1, got "%"', p_queue, coalesce(p_limit::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
            RAISE EXCEPTION 'claim in queue "%": lease must be positive and at most 876600 hours, got "%"', p_queue, p_lease
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE EXCEPTION 'claim in queue "%": now must be a finite time, got "%"', p_queue, coalesce(p_now::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    -- The same statement twice, with LIMIT 1 and with LIMIT p_limit. A
    -- parameter in LIMIT makes the generic plan look expensive (the planner
    -- assumes it keeps 10% of the rows), so the plan cache would plan the
    -- statement again on every call; with a constant it keeps one generic
    -- plan, which matters for one job per call. A batch amortizes planning.
    IF p_limit = 1 THEN
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = p_queue AND q.paused)
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    ELSE
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = p_queue AND q.paused)
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.claim(text, text, integer, interval, timestamptz) IS
'Claim up to p_limit due jobs (status pending or retrying, run_at <= p_now) of p_queue for p_worker: higher priority first, then earliest run_at, then id. Each becomes running with attempts + 1 (attempts are counted at claim; the new value is the fencing token to pass to complete, fail, heartbeat and snooze), lease_until = p_now + (p_lease, else the job''s policy lease), locked_by = p_worker, last_attempted_at = p_now. Rows locked by other claimers are skipped (FOR UPDATE SKIP LOCKED), so concurrent claims never overlap. A paused queue (backoff.queues.paused) gives no rows.
Errors: 22023 for a NULL or empty queue, a NULL worker, a limit < 1, a lease <= 0, a NULL now.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT id, status, attempts, payload, lease_until - now() AS lease FROM backoff.claim(''emails'', ''worker-1'', 10);';

-- backoff.acquire(job id, worker, lease, now): claim one given job if it is
-- due, for workflow engines that choose the step themselves
-- (docs/adr/0010-acquire-by-id.md). One guarded UPDATE; only when it
-- matches nothing is the row read to choose the error, so two workers
-- acquiring the same job get exactly one winner: the other waits for the
-- winner's row lock and then sees a running job (BK002).
CREATE OR REPLACE FUNCTION backoff.acquire(
    p_job_id bigint,
    p_worker text,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot acquire job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_worker IS NULL THEN
        RAISE EXCEPTION 'cannot acquire job "%": worker must not be null', p_job_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        RAISE EXCEPTION 'cannot acquire job "%": lease must be positive and at most 876600 hours, got "%"', p_job_id, p_lease
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot acquire job "%": now must be a finite time, got "%"', p_job_id, coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    UPDATE backoff.jobs AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        lease_until = p_now + coalesce(p_lease, (backoff._job_policy(j.policy, j.queue)).lease),
        locked_by = p_worker,
        last_attempted_at = p_now
    WHERE j.id = p_job_id
      -- "pending or retrying", spelled so that it does not imply the
      -- predicate of jobs_claimable_idx: a generic plan would otherwise
      -- scan every due job of that index for this one id.
      AND j.status NOT IN ('running', 'completed', 'dead_lettered', 'cancelled')
      AND j.run_at <= p_now
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        RETURN v_job;
    END IF;

    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    IF v_job.status = 'running' THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is running attempt "%"', p_job_id, v_job.attempts
            USING ERRCODE = 'BK002';
    END IF;
    IF v_job.status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is "%"', p_job_id, v_job.status
            USING ERRCODE = 'BK003';
    END IF;
    RAISE EXCEPTION 'job "%" is not ready until "%" (attempts "%")',
        p_job_id, backoff._iso8601(v_job.run_at), v_job.attempts
        USING ERRCODE = 'BK004',
              DETAIL = backoff._iso8601(v_job.run_at),
              HINT = format('attempts=%s', v_job.attempts);
END
$$;

COMMENT ON FUNCTION backoff.acquire(bigint, text, interval, timestamptz) IS
'Claim the job p_job_id for p_worker if it is due (pending or retrying with run_at <= p_now), exactly as claim would: running, attempts + 1, lease_until = p_now + (p_lease, else the policy lease), locked_by = p_worker; returns the job. For workflow engines that pick the step themselves. Two concurrent calls on one due job: exactly one wins, the other gets BK002. A paused queue does not stop it.
Errors: BK004 not ready: message ''job "42" is not ready until "2026-01-02T03:04:05.000000Z" (attempts "2")'', DETAIL = run_at in ISO 8601 UTC, HINT = ''attempts=2''; BK002 the job is running; BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, worker or now, a lease <= 0.
Example:
SELECT backoff.enqueue(''steps'', ''{"step": "charge"}'');
SELECT id, status, attempts, locked_by FROM backoff.acquire(1, ''orchestrator-1'');';

-- backoff.complete(job id, attempt, now): mark the running attempt p_attempt
-- of a job completed. One guarded UPDATE; the error path reads the row only
-- when it matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.complete(
    p_job_id  bigint,
    p_attempt integer,
    p_now     timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot complete job "%": now must be a finite time, got "%"', p_job_id, coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE backoff.jobs AS j
    SET status = 'completed',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF NOT FOUND THEN
        PERFORM backoff._raise_fencing_error('complete', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.complete(bigint, integer, timestamptz) IS
'Mark job p_job_id completed, if it is running attempt p_attempt (the attempts value claim returned: the fencing token). Sets completed_at = p_now, clears lease_until and locked_by; returns the job.
Errors: BK002 the job is live but not running this attempt (its lease was reaped, or another attempt holds it); BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, attempt or now, an attempt < 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts FROM backoff.complete(1, 1);';

-- backoff.complete_many(job ids, attempts, now): complete a batch in one
-- UPDATE joined to the unnested arrays. Fenced per entry: a job not running
-- the given attempt is left alone and its id not returned.
CREATE OR REPLACE FUNCTION backoff.complete_many(
    p_job_ids  bigint[],
    p_attempts integer[],
    p_now      timestamptz DEFAULT now()
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_job_ids IS NULL OR p_attempts IS NULL
       OR cardinality(p_job_ids) <> cardinality(p_attempts) OR (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
            RAISE EXCEPTION 'complete_many: now must be a finite time, got "%"', coalesce(p_now::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RAISE EXCEPTION 'complete_many: job ids and attempts must be arrays of equal length, got "%" and "%"',
            coalesce(cardinality(p_job_ids)::text, 'NULL'), coalesce(cardinality(p_attempts)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    UPDATE backoff.jobs AS j
    SET status = 'completed',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL
    FROM unnest(p_job_ids, p_attempts) AS t(id, attempt)
    WHERE j.id = t.id
      AND j.attempts = t.attempt
      AND j.status = 'running'
    RETURNING j.id;
END
$$;

COMMENT ON FUNCTION backoff.complete_many(bigint[], integer[], timestamptz) IS
'Complete a batch in one statement: p_job_ids[i] is completed if it is running attempt p_attempts[i] (completed_at = p_now, lease and locked_by cleared). Returns the ids it completed; an entry whose fencing fails (stale attempt, finished, unknown) is left untouched and not returned. The fast path for workers that claim in batches.
Errors: 22023 for NULL arrays, arrays of different lengths, a NULL now.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 3);
SELECT * FROM backoff.complete_many(ARRAY[1, 2, 3], ARRAY[1, 1, 2]);  -- job 3 ran attempt 1, not 2';

-- backoff.fail(job id, attempt, error, retry_in, retryable, now): settle a
-- failed running attempt with ONE guarded UPDATE whose new status, run_at,
-- reason and completed_at come from backoff._retry_decision, the same
-- decision reap uses. The error path reads the row only when the UPDATE
-- matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.fail(
    p_job_id    bigint,
    p_attempt   integer,
    p_error     text,
    p_retry_in  interval DEFAULT NULL,
    p_retryable boolean DEFAULT true,
    p_now       timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_error IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": error must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retry_in < interval '0' THEN
        RAISE EXCEPTION 'cannot fail job "%": retry_in must not be negative, got "%"', coalesce(p_job_id::text, 'NULL'), p_retry_in
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retryable IS NULL OR (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot fail job "%": retryable must not be null and now must be a finite time, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    UPDATE backoff.jobs AS j
    SET (status, run_at, dead_letter_reason, completed_at) = (
            SELECT d.status, d.run_at, d.dead_letter_reason, d.completed_at
            FROM backoff._retry_decision(
                backoff._job_policy(j.policy, j.queue), j.id, j.attempts, j.max_attempts,
                j.created_at, j.run_at, p_retry_in, p_retryable, p_now) AS d),
        lease_until = NULL,
        locked_by = NULL,
        last_failed_at = p_now,
        last_error = p_error,
        errors = backoff._push_error(j.errors, j.attempts, p_now, p_error, j.locked_by, 'error')
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF NOT FOUND THEN
        PERFORM backoff._raise_fencing_error('fail', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.fail(bigint, integer, text, interval, boolean, timestamptz) IS
'Report that running attempt p_attempt of job p_job_id failed with p_error. One guarded UPDATE decides: not p_retryable -> dead_lettered (reason non_retryable); attempts >= max_attempts (the job''s, else its policy''s) -> dead_lettered (max_attempts); next run after created_at + the policy deadline -> dead_lettered (deadline); otherwise retrying at p_now + (p_retry_in clamped to the policy max, else the policy delay for this attempt seeded by the job id). Dead letters get completed_at = p_now. Lease and locked_by are cleared, last_failed_at = p_now, last_error = p_error, and {attempt, at, error, worker, kind: error} is appended to errors (the 20 most recent are kept). reap takes the same decision. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, attempt, error, retryable or now, an attempt < 1, a negative retry_in.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, run_at - now() AS retry_in, last_error FROM backoff.fail(1, 1, ''smtp timeout'');';

-- backoff.reap(now, limit): move running jobs whose lease expired through
-- backoff._retry_decision, the same decision fail uses, as retryable
-- failures with message 'lease expired' and kind 'lease_expired'. Set-based
-- and batch-limited; the batch is locked with FOR UPDATE SKIP LOCKED, so
-- any number of reapers can run at once without waiting for one another or
-- settling a job twice. The outer UPDATE does not repeat the conditions: the
-- rows are locked by the subquery, which rechecked them on their latest
-- version, and a repeated "lease_until < p_now" would let the planner walk
-- the lease index instead of probing the primary key.
CREATE OR REPLACE FUNCTION backoff.reap(
    p_now   timestamptz DEFAULT now(),
    p_limit integer DEFAULT 1000
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'reap: now must be a finite time, got "%"', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'reap: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    UPDATE backoff.jobs AS j
    SET (status, run_at, dead_letter_reason, completed_at) = (
            SELECT d.status, d.run_at, d.dead_letter_reason, d.completed_at
            FROM backoff._retry_decision(
                backoff._job_policy(j.policy, j.queue), j.id, j.attempts, j.max_attempts,
                j.created_at, j.run_at, NULL, true, p_now) AS d),
        lease_until = NULL,
        locked_by = NULL,
        last_failed_at = p_now,
        last_error = 'lease expired',
        errors = backoff._push_error(j.errors, j.attempts, p_now, 'lease expired', j.locked_by, 'lease_expired')
    WHERE j.id = ANY (ARRAY(
        SELECT r.id
        FROM backoff.jobs AS r
        -- Only running jobs have a lease (CHECK jobs_lease_while_running).
        -- Adding "status = 'running'" would make the planner expect one row
        -- and prefer a bitmap scan plus a sort of every expired lease to
        -- this ordered walk of jobs_lease_idx that stops at p_limit.
        WHERE r.lease_until < p_now
        ORDER BY r.lease_until
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.reap(timestamptz, integer) IS
'Settle up to p_limit running jobs whose lease expired (lease_until < p_now) as failed attempts, through the same decision as fail (retryable, no requested delay): retrying at the policy''s next delay, or dead_lettered (max_attempts or deadline). last_error = ''lease expired'', and the history entry has kind lease_expired and the worker that held the lease. Returns how many jobs it moved. Safe to run from many places at once: each batch is locked with FOR UPDATE SKIP LOCKED.
Errors: 22023 for a NULL now, a limit < 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT backoff.reap(p_now => now() + interval ''1 minute'') AS reaped;';

-- backoff.heartbeat(job id, attempt, extend, now): extend the lease of a
-- running attempt. One guarded UPDATE; errors chosen only after it matched
-- nothing.
CREATE OR REPLACE FUNCTION backoff.heartbeat(
    p_job_id  bigint,
    p_attempt integer,
    p_extend  interval DEFAULT NULL,
    p_now     timestamptz DEFAULT now()
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lease_until timestamptz;
BEGIN
    IF p_extend <= interval '0' OR NOT backoff._valid_span(p_extend) THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": extend must be positive and at most 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), p_extend
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": now must be a finite time, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE backoff.jobs AS j
    SET lease_until = p_now + coalesce(p_extend, (backoff._job_policy(j.policy, j.queue)).lease)
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.lease_until INTO v_lease_until;
    IF NOT FOUND THEN
        PERFORM backoff._raise_fencing_error('heartbeat', p_job_id, p_attempt);
    END IF;
    RETURN v_lease_until;
END
$$;

COMMENT ON FUNCTION backoff.heartbeat(bigint, integer, interval, timestamptz) IS
'Extend the lease of running attempt p_attempt of job p_job_id to p_now + p_extend (the policy lease when NULL); returns the new lease_until. A lease that expired but was not reaped yet can still be extended: the attempt number, not the clock, says who holds the job.
Errors: BK002 the job is live but not running this attempt (reaped, re-claimed); BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, attempt or now, an attempt < 1, an extend <= 0.
Example:
SELECT backoff.enqueue(''reports'');
SELECT id FROM backoff.claim(''reports'', ''worker-1'');
SELECT backoff.heartbeat(1, 1, ''1 minute'') - now() AS lease_left;';

-- backoff.snooze(job id, attempt, delay, now): put a running attempt back
-- to pending at p_now + p_delay without spending it: attempts goes back by
-- one, so the next claim carries the same attempt number again
-- (docs/adr/0006-attempts-counted-at-claim.md).
CREATE OR REPLACE FUNCTION backoff.snooze(
    p_job_id  bigint,
    p_attempt integer,
    p_delay   interval,
    p_now     timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_delay IS NULL OR p_delay < interval '0' OR NOT backoff._valid_span(p_delay) THEN
        RAISE EXCEPTION 'cannot snooze job "%": delay must be between 0 and 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), coalesce(p_delay::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot snooze job "%": now must be a finite time, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE backoff.jobs AS j
    SET status = 'pending',
        attempts = j.attempts - 1,
        run_at = p_now + p_delay,
        lease_until = NULL,
        locked_by = NULL
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF NOT FOUND THEN
        PERFORM backoff._raise_fencing_error('snooze', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.snooze(bigint, integer, interval, timestamptz) IS
'Put running attempt p_attempt of job p_job_id back to pending with run_at = p_now + p_delay, without spending an attempt (attempts goes back by one, so the next claim has the same attempt number again). Lease and locked_by are cleared; no error is recorded. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, attempt, delay or now, an attempt < 1, a negative delay.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, run_at - now() AS runs_in FROM backoff.snooze(1, 1, ''5 minutes'');';

-- backoff.cancel(job id, reason, now): terminal 'cancelled' for a job that
-- is not finished (pending, retrying or running). A running worker learns
-- it at its next complete, fail, heartbeat or snooze (BK003).
CREATE OR REPLACE FUNCTION backoff.cancel(
    p_job_id bigint,
    p_reason text DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL OR (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot cancel job "%": job id must not be null and now must be a finite time, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE backoff.jobs AS j
    SET status = 'cancelled',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL,
        last_error = coalesce(p_reason, j.last_error)
    WHERE j.id = p_job_id
      AND j.status IN ('pending', 'running', 'retrying')
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot cancel job "%": it is "%"', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.cancel(bigint, text, timestamptz) IS
'Cancel job p_job_id if it is pending, retrying or running: status cancelled (terminal), completed_at = p_now, lease and locked_by cleared, last_error = p_reason when given. A worker still running it gets BK003 from complete, fail, heartbeat and snooze. replay brings it back. Returns the job.
Errors: BK003 the job is already completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id or now.
Example:
SELECT backoff.enqueue(''emails'');
SELECT status, last_error FROM backoff.cancel(1, ''customer deleted'');';

-- backoff.replay(job id, now): a dead-lettered or cancelled job back to
-- pending, due at p_now, with a fresh attempt budget. The error history and
-- last_error stay as evidence.
CREATE OR REPLACE FUNCTION backoff.replay(
    p_job_id bigint,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL OR (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'cannot replay job "%": job id must not be null and now must be a finite time, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            attempts = 0,
            run_at = p_now,
            dead_letter_reason = NULL,
            completed_at = NULL,
            lease_until = NULL,
            locked_by = NULL
        WHERE j.id = p_job_id
          AND j.status IN ('dead_lettered', 'cancelled')
        RETURNING j.* INTO v_job;
    EXCEPTION WHEN unique_violation THEN
        SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
        RAISE EXCEPTION 'cannot replay job "%": an unfinished job of queue "%" holds its dedupe key "%"',
            p_job_id, v_job.queue, v_job.dedupe_key
            USING ERRCODE = 'BK003';
    END;
    IF v_job.id IS NOT NULL THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', v_job.queue);
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot replay job "%": it is "%", only dead_lettered or cancelled jobs can be replayed', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.replay(bigint, timestamptz) IS
'Bring a dead_lettered or cancelled job back: status pending, run_at = p_now, attempts = 0, dead_letter_reason and completed_at cleared; errors and last_error are kept as history. The job keeps its created_at, so a policy deadline still counts from it. Notifies channel backoff_jobs. Returns the job.
Errors: BK003 the job is pending, running, retrying or completed, or an unfinished job of its queue now holds its dedupe key; BK001 no such job; 22023 a NULL id or now.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.fail(1, 1, ''bad address'', p_retryable => false);
SELECT status, attempts, jsonb_array_length(errors) AS history FROM backoff.replay(1);';

-- backoff.prune(older than, limit, now): delete up to p_limit finished jobs
-- (completed, dead_lettered, cancelled) whose completed_at is older than
-- p_now - p_older_than. No index serves it, on purpose: an index on
-- completed_at would be paid by every settle, and prune runs rarely. The
-- scan stops as soon as it has p_limit rows, and old rows sit early in the
-- heap (docs/adr/0009-retention-and-prune.md).
CREATE OR REPLACE FUNCTION backoff.prune(
    p_older_than interval,
    p_limit      integer DEFAULT 10000,
    p_now        timestamptz DEFAULT now()
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' OR NOT backoff._valid_span(p_older_than) THEN
        RAISE EXCEPTION 'prune: older_than must be between 0 and 876600 hours, got "%"', coalesce(p_older_than::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'prune: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'prune: now must be a finite time, got "%"', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM backoff.jobs AS j
    WHERE j.id = ANY (ARRAY(
        SELECT f.id
        FROM backoff.jobs AS f
        WHERE f.status IN ('completed', 'dead_lettered', 'cancelled')
          AND f.completed_at < p_now - p_older_than
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.prune(interval, integer, timestamptz) IS
'Delete up to p_limit finished jobs (completed, dead_lettered, cancelled) whose completed_at is before p_now - p_older_than; returns how many. Dead letters are evidence: choose p_older_than long enough to read them. Call it repeatedly until it returns less than p_limit. Safe to run concurrently (FOR UPDATE SKIP LOCKED).
Errors: 22023 for a NULL or negative p_older_than, a limit < 1, a NULL now.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1);
SELECT backoff.prune(''7 days'', p_now => now() + interval ''8 days'') AS deleted;';

-- backoff.stats(window, now): one row per queue for the CLI and dashboards:
-- jobs per status, how many are due and how long the oldest due job has
-- waited, and what happened in the window (p_now - p_window, p_now]:
-- retries scheduled and jobs dead-lettered. A failure is read from the error
-- history, so only the 20 most recent per job count. One scan of the table:
-- fine for an operator's command, not for a tight loop.
CREATE OR REPLACE FUNCTION backoff.stats(
    p_window interval DEFAULT '1 hour',
    p_now    timestamptz DEFAULT now()
)
RETURNS TABLE (
    queue          text,
    pending        bigint,
    running        bigint,
    retrying       bigint,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    due            bigint,
    oldest_due_age interval,
    retries        bigint,
    dead_letters   bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window < interval '0' OR NOT backoff._valid_span(p_window) THEN
        RAISE EXCEPTION 'stats: window must be between 0 and 876600 hours, got "%"', coalesce(p_window::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (p_now IS NULL OR NOT pg_catalog.isfinite(p_now)) THEN
        RAISE EXCEPTION 'stats: now must be a finite time, got "%"', coalesce(p_now::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH counts AS (
        SELECT j.queue,
               count(*) FILTER (WHERE j.status = 'pending') AS pending,
               count(*) FILTER (WHERE j.status = 'running') AS running,
               count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
               count(*) FILTER (WHERE j.status = 'completed') AS completed,
               count(*) FILTER (WHERE j.status = 'dead_lettered') AS dead_lettered,
               count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now) AS due,
               p_now - min(j.run_at) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now)
                   AS oldest_due_age,
               count(*) FILTER (WHERE j.status = 'dead_lettered'
                                  AND j.completed_at > p_now - p_window AND j.completed_at <= p_now)
                   AS dead_letters
        FROM backoff.jobs AS j
        GROUP BY j.queue
    ),
    failures AS (
        -- Failures in the window that were followed by a retry: every
        -- history entry in the window but the one that dead-lettered its job.
        SELECT j.queue, count(*) AS retries
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL jsonb_array_elements(j.errors) WITH ORDINALITY AS e(entry, n)
        WHERE j.last_failed_at > p_now - p_window
          AND (e.entry ->> 'at')::timestamptz > p_now - p_window
          AND (e.entry ->> 'at')::timestamptz <= p_now
          AND NOT (j.status = 'dead_lettered' AND e.n = jsonb_array_length(j.errors))
        GROUP BY j.queue
    )
    SELECT c.queue, c.pending, c.running, c.retrying, c.completed, c.dead_lettered, c.cancelled,
           c.due, c.oldest_due_age, coalesce(f.retries, 0), c.dead_letters
    FROM counts AS c
    LEFT JOIN failures AS f ON f.queue = c.queue
    ORDER BY c.queue;
END
$$;

COMMENT ON FUNCTION backoff.stats(interval, timestamptz) IS
'One row per queue that has jobs: counts per status (pending, running, retrying, completed, dead_lettered, cancelled); due = pending or retrying with run_at <= p_now; oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and for the window (p_now - p_window, p_now]: retries = failed attempts (handler errors and expired leases) followed by a retry, read from the error history; dead_letters = jobs dead-lettered. Scans the whole table: for operators and dashboards, not for tight loops.
Errors: 22023 for a NULL or negative window, a NULL now.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT queue, pending, running, due, retries, dead_letters FROM backoff.stats(''15 minutes'');';

-- ===== migration 3: 003_roles.sql =====

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

-- ===== migration 4: 004_controls_scopes_and_fencing.sql =====

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

-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
-- backoff.schema_version(): the migration version installed in this
-- database, so clients can refuse to run against an older schema.
CREATE OR REPLACE FUNCTION backoff.schema_version()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT version FROM backoff.schema_migrations
$$;

COMMENT ON FUNCTION backoff.schema_version() IS
'The pgbackoff migration version installed in this database. Clients compare it with the version they need and ask for `backoffctl migrate up` when it is older.';

-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- A month counts as 30 days and a day as 24 hours: the linearization
-- PostgreSQL's interval comparison uses, so a CHECK such as
-- "base <= interval '876600 hours'" and this conversion agree. (extract(epoch)
-- alone would count a year as 365.25 days but compare it as 360.) Exact: the
-- months are taken out before extract(epoch …), which is numeric.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ((extract(year FROM p_interval) * 12 + extract(month FROM p_interval)) * 2592000000000
            + extract(epoch FROM p_interval - make_interval(years => extract(year FROM p_interval)::integer,
                                                            months => extract(month FROM p_interval)::integer)) * 1000000
           )::bigint
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
-- result does too, and any delay of base (>= 1 µs) × 2^60 µs (36,559 years)
-- is above every allowed max (100 years). docs/adr/0004-identical-math-in-sql-and-go.md
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
-- float8, one operator at a time, in the same order as the Go mirror
-- (client/policy/delay.go), so both give the same result to the microsecond
-- (docs/adr/0004-identical-math-in-sql-and-go.md). Change one, change both,
-- and the shared vectors (client/policy/testdata/vectors.json) tell.
--
-- Limits (the same as the policies table's CHECKs and Policy.Validate):
-- durations 0..100 years (3155760000000000 µs, below 2^53 so exact in a
-- double), multiplier 1..1000, exponent 1..10, jitter_ratio 0 or
-- 0.000001..1 (a smaller ratio underflows float8, which PostgreSQL raises).
-- A NULL seed is seed 0.
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
    c_limit_us CONSTANT bigint := 3155760000000000;  -- 100 years
    v_delay float8;
    v_max   float8;
    v_len   integer;
    v_entry bigint;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got "%"', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 OR p_base_us > c_limit_us THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%" µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 OR p_max_us > c_limit_us THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%" µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_max := p_max_us::float8;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        -- NaN compares above every number in PostgreSQL, so "> 1000" rejects it.
        IF p_multiplier IS NULL OR NOT (p_multiplier >= 1 AND p_multiplier <= 1000) THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got "%"', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got "%"', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_entry := p_schedule_us[LEAST(p_attempt, v_len)];
        IF v_entry IS NULL OR v_entry < 0 OR v_entry > c_limit_us THEN
            RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%" µs', coalesce(v_entry::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := v_entry::float8;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    -- The cap.
    v_delay := LEAST(v_delay, v_max);

    -- Jitter, with u from md5('SEED:ATTEMPT'). Each float8 operator rounds on
    -- its own; Go converts explicitly to stop fused multiply-add.
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL
           OR NOT (p_jitter_ratio = 0 OR (p_jitter_ratio >= 0.000001 AND p_jitter_ratio <= 1)) THEN
            RAISE EXCEPTION 'jitter_ratio must be 0 or between 0.000001 and 1, got "%"', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    -- Whole microseconds, rounded down: never above the cap.
    RETURN floor(v_delay)::bigint;
END
$$;

-- backoff._policy_capped_us(policy row, attempt): the delay of a stored
-- policy for failed attempt p_attempt before jitter, capped at max_delay: the
-- float8 that backoff._delay_us computes before it applies the jitter; NULL
-- for an attempt below 1 (or NULL). Private: the part of the delay that does
-- not depend on the job, so that reap computes it once per distinct
-- (policy, counted attempt) of its batch and fail once (docs/adr/0052);
-- backoff._policy_delay_us adds the job's jitter.
--
-- No validation: a policies row passed its CHECK constraints (strategy,
-- durations within 100 years, multiplier 1..1000, exponent 1..10, a
-- non-empty schedule for strategy 'schedule'), which are _delay_us's
-- checks. The same float8 operations, in the same order, as _delay_us (and
-- the Go mirror, docs/adr/0004). PL/pgSQL, not an inlined expression, on
-- purpose: it runs once per batch and policy, and fail initialises every
-- expression of its UPDATE on each call, so a small call node beats a large
-- inlined tree there (measured in docs/adr/0052).
CREATE OR REPLACE FUNCTION backoff._policy_capped_us(
    p_policy  backoff.policies,
    p_attempt integer
)
RETURNS float8
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    c_limit CONSTANT float8 := 1152921504606846976.0;  -- 2^60
    v_delay  float8;
    v_result float8 := 1.0;
    v_square float8;
    v_k      integer;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RETURN NULL;
    END IF;
    CASE p_policy.strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8;
    WHEN 'linear' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * backoff._clamped_power(p_policy.multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * backoff._clamped_power(p_attempt::float8, p_policy.exponent);
    ELSE
        v_delay := backoff._interval_us(p_policy.schedule[LEAST(p_attempt, cardinality(p_policy.schedule))])::float8;
    END CASE;
    RETURN LEAST(v_delay, backoff._interval_us(p_policy.max_delay)::float8);
END
$$;

-- backoff._policy_delay_us(policy row, attempt, seed [, capped]): the delay
-- in microseconds of a stored policy for failed attempt p_attempt, jitter
-- seeded by p_seed included: what backoff._delay_us returns for the row's
-- parameters, to the bit. Private; shared by retry_delay, schedule and the
-- retry-or-dead-letter decision.
--
-- The four-argument form takes p_capped_us = backoff._policy_capped_us(
-- p_policy, p_attempt), the part that does not depend on the job, so that
-- reap computes it once per distinct (policy, counted attempt) of its batch
-- (docs/adr/0052), and adds the jitter: one expression, inlined into the
-- decision, whose only call per row is md5 (_jitter_unit) when the policy
-- has jitter. No validation: the row passed the policies table's CHECKs.
-- An attempt below 1 (or NULL) goes to _delay_us, which raises 22023 as it
-- always did. The jitter arithmetic is _delay_us's, operator for
-- operator (docs/adr/0004).
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy    backoff.policies,
    p_attempt   integer,
    p_seed      bigint,
    p_capped_us float8
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_attempt >= 1 THEN floor(
               CASE (p_policy).jitter
                   WHEN 'none' THEN p_capped_us
                   WHEN 'full' THEN p_capped_us * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)
                   WHEN 'equal'
                       THEN p_capped_us / 2 + p_capped_us / 2 * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)
                   WHEN 'proportional'
                       THEN LEAST(p_capped_us * (1 - (p_policy).jitter_ratio
                                                 + 2 * (p_policy).jitter_ratio * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)),
                                  backoff._interval_us((p_policy).max_delay)::float8)
               END)::bigint
           -- Raises 22023 "attempt must be at least 1, got ..." (the first
           -- thing _delay_us checks), as it always did.
           ELSE backoff._delay_us('none', 0, 1, 1, NULL, 0, 'none', 0, p_attempt, p_seed)
           END
$$;

-- The three-argument form, for one delay at a time (retry_delay, schedule).
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy  backoff.policies,
    p_attempt integer,
    p_seed    bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT backoff._policy_delay_us(p_policy, p_attempt, p_seed, backoff._policy_capped_us(p_policy, p_attempt))
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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- backoff.compute_delay(...): the backoff delay of DESIGN §5 for explicit
-- policy parameters, no table involved: pure and IMMUTABLE, so it can be
-- used in indexes, generated columns, and by callers that keep their policy
-- elsewhere. Parameters a strategy or jitter does not use are ignored.
CREATE OR REPLACE FUNCTION backoff.compute_delay(
    p_strategy     text,
    p_base         interval,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule     interval[],
    p_max          interval,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_limit CONSTANT interval := interval '876600 hours';  -- 100 years of 365.25 days
    v_entry interval;
BEGIN
    -- Intervals are checked before they become microseconds: a huge interval
    -- would otherwise fail as a bigint overflow instead of a clear 22023.
    IF p_base IS NULL OR p_base < interval '0' OR p_base > c_limit THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%"', coalesce(p_base::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max IS NULL OR p_max < interval '0' OR p_max > c_limit THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%"', coalesce(p_max::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_strategy = 'schedule' THEN
        FOREACH v_entry IN ARRAY coalesce(p_schedule, '{}') LOOP
            IF v_entry IS NULL OR v_entry < interval '0' OR v_entry > c_limit THEN
                RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%"', coalesce(v_entry::text, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    RETURN backoff._delay_us(
        p_strategy,
        backoff._interval_us(p_base),
        p_multiplier,
        p_exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest(p_schedule) AS s),
        backoff._interval_us(p_max),
        p_jitter,
        p_jitter_ratio,
        p_attempt,
        p_seed) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.compute_delay(text, interval, float8, integer, interval[], interval, text, float8, integer, bigint) IS
'Backoff delay before the retry that follows failed attempt p_attempt (1-based), from explicit policy parameters: strategy none|fixed|linear|exponential|polynomial|schedule, then the cap p_max, then jitter none|full|equal|proportional with u from md5(''SEED:ATTEMPT''). Pure and IMMUTABLE; identical to the Go mirror (client/policy) to the microsecond. Raises 22023 naming the bad parameter. docs/policies.md has the formulas.
Example: SELECT backoff.compute_delay(''exponential'', ''1 second'', 2.0, 2, ''{}'', ''1 minute'', ''proportional'', 0.1, 3, 42);';

-- backoff.schedule(policy, attempts, seed): the retry timeline of a named
-- policy, one row per failed attempt: the delay before the next try (jitter
-- included, from p_seed) and the cumulative wait since the first failure.
-- Every row comes from backoff._policy_delay_us, the function fail and reap
-- use, so the timeline is what jobs will really do.
CREATE OR REPLACE FUNCTION backoff.schedule(
    p_policy   text,
    p_attempts integer DEFAULT 10,
    p_seed     bigint DEFAULT 0
)
RETURNS TABLE (attempt integer, delay interval, cumulative interval)
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    -- 1000 rows of at most 100 years each stay inside interval's range.
    IF p_attempts IS NULL OR p_attempts < 1 OR p_attempts > 1000 THEN
        RAISE EXCEPTION 'attempts must be between 1 and 1000, got "%"', coalesce(p_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT g.n, d.v_delay, sum(d.v_delay) OVER (ORDER BY g.n)
        FROM generate_series(1, p_attempts) AS g(n)
        CROSS JOIN LATERAL (
            SELECT backoff._policy_delay_us(v_policy, g.n, coalesce(p_seed, 0)) * interval '1 microsecond' AS v_delay
        ) AS d
        ORDER BY g.n;
END
$$;

COMMENT ON FUNCTION backoff.schedule(text, integer, bigint) IS
'The retry timeline of the named policy: for failed attempts 1..p_attempts (at most 1000), the delay before the next try (jitter included, deterministic from p_seed, as for a job whose id is p_seed) and the cumulative wait. What an operator reads before choosing a policy; backoffctl schedule prints the same numbers. Raises 22023 for an unknown policy.
Example: SELECT * FROM backoff.schedule(''moderate'', 5, 42);';

-- backoff._step_backoff(request, attempts, max, multiplier): validates the
-- parameters of calculate_step_next_retry_time and returns the delay of its
-- fallback path, LEAST(multiplier^attempts seconds, max seconds). Private;
-- shared by the timestamptz and timestamp overloads.
--
-- tasker-core's expression power(multiplier, attempts) overflows numeric
-- (and float8) for large attempts. Here the cap is decided before any
-- exponentiation: when attempts × ln(multiplier) exceeds ln(max) + 1, the
-- power is above e × max and the result is max; the margin of 1 is far wider
-- than any float8 rounding of the logarithms. Otherwise the power is at most
-- about 2.7 × max (≤ 5.9e9) and is computed with the original expression,
-- so every result the original could compute comes out the same: numeric
-- power, then PostgreSQL's interval multiplication, which rounds fractional
-- seconds to the nearest microsecond (1.1^3 → 1.331 s).
--
-- attempts NULL follows the original too: LEAST ignores the NULL power, so
-- the delay is max.
CREATE OR REPLACE FUNCTION backoff._step_backoff(
    p_request_seconds integer,
    p_attempts        integer,
    p_max_seconds     integer,
    p_multiplier      numeric
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_max interval;
BEGIN
    IF p_request_seconds < 0 THEN
        RAISE EXCEPTION 'backoff_request_seconds must not be negative, got "%"', p_request_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempts < 0 THEN
        RAISE EXCEPTION 'attempts must not be negative, got "%"', p_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_seconds IS NULL OR p_max_seconds <= 0 THEN
        RAISE EXCEPTION 'p_max_backoff_seconds must be positive, got "%"', coalesce(p_max_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- NaN is neither < 1 nor finite; 'Infinity' is not finite.
    IF p_multiplier IS NULL OR p_multiplier = 'NaN'::numeric OR p_multiplier = 'Infinity'::numeric
       OR p_multiplier < 1 THEN
        RAISE EXCEPTION 'p_backoff_multiplier must be a finite number of at least 1, got "%"', coalesce(p_multiplier::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_max := p_max_seconds * interval '1 second';
    IF p_attempts IS NULL THEN
        RETURN v_max;
    END IF;
    IF p_attempts > 0 AND p_multiplier > p_max_seconds THEN
        RETURN v_max;  -- multiplier^attempts >= multiplier > max (and ln needs no huge float8)
    END IF;
    IF p_attempts::float8 * ln(p_multiplier::float8) > ln(p_max_seconds::float8) + 1 THEN
        RETURN v_max;
    END IF;
    RETURN LEAST(power(p_multiplier, p_attempts::numeric) * interval '1 second', v_max);
END
$$;

-- backoff.calculate_step_next_retry_time(...): tasker-core's dual-path rule
-- (TAS-57), drop-in, with its parameter names and defaults: an explicit
-- request (backoff_request_seconds after last_attempted_at) wins; otherwise
-- failure_time + LEAST(multiplier^attempts seconds, max seconds); otherwise
-- NULL. Unlike the original it never overflows (attempts up to 2^31-1), and
-- rejects invalid parameters with 22023 whichever path applies. Fractional
-- seconds of the power are kept to the microsecond (rounded to nearest, as
-- the original expression does). The timestamp overload serves users of the
-- original's timestamp-without-time-zone columns.
CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamptz,
    failure_time            timestamptz,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamp,
    failure_time            timestamp,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamptz, timestamptz, integer, integer, numeric) IS
'tasker-core''s dual-path retry time: last_attempted_at + backoff_request_seconds when both are given; else failure_time + LEAST(p_backoff_multiplier^attempts, p_max_backoff_seconds) seconds (fractions kept to the microsecond); else NULL. Never overflows, for any attempts up to 2^31-1. Raises 22023 naming the parameter for negative attempts or backoff_request_seconds, p_max_backoff_seconds <= 0, p_backoff_multiplier < 1, NaN or infinite.
Example: SELECT backoff.calculate_step_next_retry_time(NULL, NULL, ''2025-01-01 00:00:00+00'', 3);  -- 00:00:08';

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamp, timestamp, integer, integer, numeric) IS
'The timestamp-without-time-zone overload of calculate_step_next_retry_time, for drop-in users of tasker-core''s original: same rule, same errors.
Example: SELECT backoff.calculate_step_next_retry_time(30, ''2025-01-01 00:00:00'', NULL, 0);  -- 00:00:30';

-- backoff._iso8601(at): a timestamptz as ISO 8601 in UTC with microseconds
-- ("2026-01-02T03:04:05.000006Z"), whatever the session's TimeZone. Private;
-- used for the error history and for BK004's DETAIL, which clients parse.
CREATE OR REPLACE FUNCTION backoff._iso8601(p_at timestamptz)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- backoff._push_error(errors, attempt, counted, at, error, worker, kind):
-- the job's error history with one entry appended, keeping the 20 most
-- recent entries (the oldest are dropped). Entries are objects
-- {"attempt", "counted", "at" (ISO 8601 UTC), "error", "worker", "kind"}:
-- attempt is the fencing token of the attempt that failed (attempts, unique
-- per claim, so unique per entry), counted its place in the budget
-- (attempts - uncounted_attempts, what max_attempts bounds: docs/adr/0020),
-- kind 'error' (a handler's failure) or 'lease_expired' (reaped). Private;
-- used by fail and reap. One expression, so PostgreSQL inlines it into the
-- UPDATE; the JSON path runs only when there is something to drop (it costs
-- about as much as the rest of the entry).
CREATE OR REPLACE FUNCTION backoff._push_error(
    p_errors  jsonb,
    p_attempt integer,
    p_counted integer,
    p_at      timestamptz,
    p_error   text,
    p_worker  text,
    p_kind    text
)
RETURNS jsonb
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_array_length(p_errors) < 20 THEN p_errors
                ELSE jsonb_path_query_array(p_errors, '$[last - 18 to last]') END
        || jsonb_build_array(jsonb_build_object(
               'attempt', p_attempt,
               'counted', p_counted,
               'at', backoff._iso8601(p_at),
               'error', p_error,
               'worker', p_worker,
               'kind', p_kind))
$$;

-- backoff._governing_policy(policy, queue): the name of the policy that
-- governs a job, the one answer to that question
-- (docs/adr/0030-one-policy-answer.md): the job's recorded policy if it
-- names a row of backoff.policies, else its queue's (backoff.queues), else
-- 'default'. A name with no row (a policy deleted after the job was
-- enqueued) falls through to the next candidate, so a job is never stuck
-- for want of a policy.
--
-- Private. A one-row set-returning SQL function so that PostgreSQL inlines
-- it into the caller's query where it is used in FROM (as
-- backoff._retry_decision, docs/adr/0041): enqueue's INSERT then runs its
-- two primary-key look-ups as part of its own plan, once per statement for
-- one job and as a correlated subplan per row for a bulk enqueue, instead of
-- a PL/pgSQL call per job (profile in docs/benchmarks.md). A scalar SQL
-- function with sub-selects is never inlined, hence the table form.
--
-- backoff._job_policy_name(policy, queue) is the same answer as a scalar,
-- for the other callers (_job_policy, job_policy, pause_queue).
-- Both are called from SECURITY DEFINER functions with a pinned search_path.
CREATE OR REPLACE FUNCTION backoff._governing_policy(p_policy text, p_queue text)
RETURNS TABLE (name text)
LANGUAGE sql
STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT coalesce(
        (SELECT p.name FROM backoff.policies AS p WHERE p.name = p_policy),
        (SELECT q.policy FROM backoff.queues AS q WHERE q.name = p_queue),
        'default')
$$;

CREATE OR REPLACE FUNCTION backoff._job_policy_name(p_policy text, p_queue text)
RETURNS text
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
BEGIN
    -- PL/pgSQL, not SQL: a scalar SQL function with a FROM is never inlined,
    -- and an SQL function that is not inlined sets up its executor on every
    -- call (about 80 µs measured); PL/pgSQL plans the query once per session.
    RETURN (SELECT g.name FROM backoff._governing_policy(p_policy, p_queue) AS g);
END
$$;

-- backoff.job_policy(policy, queue): the name of the policy that governs a
-- job, for clients and operators; the answer is backoff._job_policy_name's
-- (docs/adr/0030-one-policy-answer.md).
CREATE OR REPLACE FUNCTION backoff.job_policy(p_policy text, p_queue text)
RETURNS text
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._job_policy_name(p_policy, p_queue)
$$;

COMMENT ON FUNCTION backoff.job_policy(text, text) IS
'The name of the policy that governs a job whose recorded policy is p_policy (backoff.jobs.policy) in queue p_queue: p_policy if it names a row of backoff.policies, else the queue''s policy (backoff.queues), else ''default''. It is the same answer every function uses: enqueue records it; claim, acquire, heartbeat, fail and reap take that policy''s lease and retry curve; backoffctl and the Go client show it.
Example:
SELECT backoff.job_policy(NULL, ''emails'');
SELECT id, backoff.job_policy(policy, queue) FROM backoff.jobs;';

-- backoff._job_policy(policy, queue): the row of the policy that governs a
-- job, as backoff._job_policy_name names it; with no such row (no 'default' row
-- either) it raises 22023. Private; PL/pgSQL so
-- that its plans are cached (docs/adr/0008-single-retry-decision.md).
CREATE OR REPLACE FUNCTION backoff._job_policy(p_policy text, p_queue text)
RETURNS backoff.policies
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_policy backoff.policies;
    -- Named once: in the WHERE clause the call would run for every row a
    -- sequential scan of backoff.policies reads (the plan for a small,
    -- analyzed table), four calls per fail or reap batch with the shipped
    -- profiles (docs/adr/0052).
    v_name   text := backoff._job_policy_name(p_policy, p_queue);
BEGIN
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = v_name;
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    RAISE EXCEPTION 'unknown policy "%" and no "default" policy', coalesce(p_policy, 'NULL')
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- backoff._clamp_time(timestamptz): the time kept inside years 1 to 9999
-- (UTC), the range every client can represent (docs/reliability.md; a Go
-- time.Time marshals to JSON only up to year 9999). Private; applied to
-- every run_at and lease_until computed as a time plus an interval, so that
-- a long delay near the end of the range means "as late as possible"
-- instead of a year-10000 value that breaks readers. One expression, so it
-- is inlined.
CREATE OR REPLACE FUNCTION backoff._clamp_time(p_time timestamptz)
RETURNS timestamptz
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT LEAST(GREATEST(p_time, '0001-01-01 00:00:00+00'::timestamptz),
                            '9999-12-31 23:59:59.999999+00'::timestamptz)
$$;

-- backoff._retry_decision(...): THE decision "retry at T, or dead-letter
-- with a reason" for a failed attempt. It exists once: fail (one row) and
-- reap (a batch of expired leases) both take it, so a reported failure and
-- a silent crash are judged identically
-- (docs/adr/0008-single-retry-decision.md). Pure: everything it needs is a
-- parameter, time included.
--
-- p_attempts is the counted attempt that failed, attempts -
-- uncounted_attempts (docs/adr/0020): claims given back by snooze or
-- before a replay do not count against max attempts nor grow the delay.
-- p_lease_expiries is how many times the job's lease expired, this expiry
-- included when reap asks (docs/adr/0046).
-- In order:
--   not p_retryable                          -> dead_lettered, 'non_retryable'
--   p_lease_expiries >= policy.max_lease_expiries
--                                            -> dead_lettered, 'lease_expiries'
--   p_attempts >= max attempts               -> dead_lettered, 'max_attempts'
--   next run after created_at + deadline     -> dead_lettered, 'deadline'
--   otherwise                                -> retrying at the next run
-- where max attempts = coalesce(p_max_attempts, policy.max_attempts) and the
-- next run = p_now + (p_retry_in clamped to policy.max_delay when given,
-- else the policy's delay for counted attempt p_attempts seeded by the job id).
-- p_capped_us is backoff._policy_capped_us(p_policy, p_attempts), the part
-- of that delay that does not depend on the job: the caller computes it
-- (reap once per distinct policy and counted attempt of its batch,
-- docs/adr/0052) and the decision adds the job's jitter
-- (backoff._policy_delay_us); it is an input, not a second decision.
-- A dead letter keeps its run_at and gets completed_at = p_now.
--
-- Shape (docs/adr/0041-set-based-reap-and-inlined-decision.md): one SQL
-- SELECT returning one row, so that PostgreSQL inlines it into the caller's
-- query as a subquery (a set-returning LANGUAGE sql function that is not
-- STRICT, VOLATILE or SECURITY DEFINER is inlined where it is used in FROM):
-- no function call, no PL/pgSQL per row. Callers pass the policy as a column
-- (a Var), not as a function call: an inlined function's argument is copied
-- into every place the body uses it. The next run is computed once (the
-- OFFSET 0 keeps its subquery from being flattened into both places that
-- read it), and the policy's delay only for a job that is retried.
CREATE OR REPLACE FUNCTION backoff._retry_decision(
    p_policy       backoff.policies,
    p_capped_us    float8,
    p_job_id       bigint,
    p_attempts     integer,
    p_max_attempts integer,
    p_lease_expiries integer,
    p_created_at   timestamptz,
    p_run_at       timestamptz,
    p_retry_in     interval,
    p_retryable    boolean,
    p_now          timestamptz
)
RETURNS TABLE (status text, run_at timestamptz, dead_letter_reason text, completed_at timestamptz)
LANGUAGE sql
STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT CASE WHEN r.reason IS NULL THEN 'retrying' ELSE 'dead_lettered' END,
           CASE WHEN r.reason IS NULL THEN backoff._clamp_time(n.next_run) ELSE p_run_at END,
           r.reason,
           CASE WHEN r.reason IS NOT NULL THEN p_now END
    FROM (SELECT CASE
                     WHEN NOT p_retryable
                          OR p_lease_expiries >= (p_policy).max_lease_expiries
                          OR p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN NULL
                     WHEN p_retry_in IS NULL
                         THEN p_now + backoff._policy_delay_us(p_policy, p_attempts, p_job_id, p_capped_us) * interval '1 microsecond'
                     ELSE p_now + least(p_retry_in, (p_policy).max_delay)
                 END AS next_run
          OFFSET 0) AS n
    CROSS JOIN LATERAL (
        SELECT CASE
                   WHEN NOT p_retryable THEN 'non_retryable'
                   WHEN p_lease_expiries >= (p_policy).max_lease_expiries THEN 'lease_expiries'
                   WHEN p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN 'max_attempts'
                   WHEN (p_policy).deadline IS NOT NULL
                        AND n.next_run > p_created_at + (p_policy).deadline THEN 'deadline'
               END AS reason) AS r
$$;

-- backoff._raise_fencing_error(action, job id, attempt): raises the error
-- for a guarded UPDATE on a running attempt (complete, fail, heartbeat,
-- snooze) that matched no row. It runs only after that UPDATE, so it reads
-- the row as it is now and never decides before writing:
--   NULL id or attempt, attempt < 1     -> 22023
--   no such job                         -> BK001
--   completed, dead_lettered, cancelled -> BK003
--   otherwise (pending, retrying, or running another attempt) -> BK002
-- Private. Always raises.
CREATE OR REPLACE FUNCTION backoff._raise_fencing_error(
    p_action  text,
    p_job_id  bigint,
    p_attempt integer
)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_status   text;
    v_attempts integer;
    v_queue    text;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot % job "NULL": job id must not be null', p_action
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'cannot % job "%": attempt must be at least 1, got "%"',
            p_action, p_job_id, coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.status, j.attempts, j.queue INTO v_status, v_attempts, v_queue
    FROM backoff.jobs AS j
    WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    -- A scoped caller learns nothing about another queue's job.
    PERFORM backoff._check_queue(ARRAY[v_queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);
    IF v_status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot % job "%": it is "%"', p_action, p_job_id, v_status
            USING ERRCODE = 'BK003';
    END IF;
    IF v_status = 'running' THEN
        RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is running attempt "%"',
            p_action, p_job_id, p_attempt, v_attempts
            USING ERRCODE = 'BK002';
    END IF;
    RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is "%" after attempt "%"',
        p_action, p_job_id, p_attempt, v_status, v_attempts
        USING ERRCODE = 'BK002';
END
$$;

-- backoff._valid_span(interval): true for NULL or a finite interval of at
-- most 876600 hours (100 years of 365.25 days, the bound of every policy
-- duration). Private. Leases, delays and windows beyond it would push a
-- timestamp out of PostgreSQL's range (22008) or, on PostgreSQL 17 where
-- intervals can be infinite, leave a lease that never expires; the callers
-- refuse them with 22023 instead.
CREATE OR REPLACE FUNCTION backoff._valid_span(p_value interval)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_value IS NULL
        OR (pg_catalog.isfinite(p_value) AND p_value <= interval '876600 hours' AND p_value >= interval '-876600 hours')
$$;

-- backoff._now(p_now): the time a function works at
-- (docs/adr/0035-time-is-not-a-privilege.md). Private; every public function
-- that takes p_now starts with p_now := backoff._now(p_now).
--   NULL or now()  -> now(), the transaction's clock, without reading any
--                     table (the hot path of every client without a clock);
--   not finite, or outside years 1 to 9999 (UTC) -> 22023 naming it;
--   otherwise      -> p_now, when backoff.settings.time_injection is on, or
--                     it lies within max_clock_skew of now(), or the caller
--                     is a member of backoff_admin; else 22023.
-- The caller is the role the session acts as: the SET ROLE role, else the
-- login (session_user). current_user cannot say it: the public functions
-- are SECURITY DEFINER, so inside them it is always backoff_owner. A missing
-- settings row means the defaults (5 minutes, no injection).
--
-- Two functions: backoff._now is the hot path as an inlinable SQL
-- expression (a PL/pgSQL caller's `p_now := backoff._now(p_now)` then costs
-- no function call when p_now is NULL or now(), the common case), and
-- backoff._injected_now (created first: an SQL body is checked when it is
-- created) checks every other value.
CREATE OR REPLACE FUNCTION backoff._injected_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_skew      interval;
    v_injection boolean;
    v_role      text;
BEGIN
    IF NOT (p_now >= '0001-01-01 00:00:00+00'::timestamptz AND p_now < '10000-01-01 00:00:00+00'::timestamptz) THEN
        RAISE EXCEPTION 'now must be a finite time between years 1 and 9999, got "%"', p_now
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.max_clock_skew, s.time_injection INTO v_skew, v_injection FROM backoff.settings AS s;
    IF v_injection THEN
        RETURN p_now;
    END IF;
    v_skew := coalesce(v_skew, interval '5 minutes');
    IF p_now >= pg_catalog.now() - v_skew AND p_now <= pg_catalog.now() + v_skew THEN
        RETURN p_now;
    END IF;
    v_role := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user::text);
    IF pg_catalog.pg_has_role(v_role, 'backoff_admin', 'MEMBER') THEN
        RETURN p_now;
    END IF;
    RAISE EXCEPTION 'now "%" is further than max_clock_skew "%" from the database clock "%"', p_now, v_skew, pg_catalog.now()
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'pass NULL for the database clock; only backoff_admin may inject time, unless backoff.settings.time_injection is on';
END
$$;

CREATE OR REPLACE FUNCTION backoff._now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql
STABLE
AS $$
    SELECT CASE WHEN p_now IS NULL OR p_now = pg_catalog.now() THEN pg_catalog.now()
                ELSE backoff._injected_now(p_now) END
$$;

-- backoff._check_name(what, value): value itself when it is a name of 1 to
-- 128 bytes without control characters (C0, DEL, C1); otherwise 22023
-- naming the value (docs/reliability.md), raised by backoff._bad_name. Private;
-- every function that takes a queue, policy, worker or dedupe key checks it
-- here, so a name can always be notified (NOTIFY payloads are limited to
-- 8000 bytes), indexed, replayed and printed on one terminal line.
--
-- A SQL function that PostgreSQL inlines: called as an assignment
-- (p_queue := backoff._check_name('queue', p_queue)) it is a PL/pgSQL
-- simple expression, evaluated without a query (a PERFORM would run one
-- through SPI on every call of the hot path).
CREATE OR REPLACE FUNCTION backoff._bad_name(p_what text, p_value text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION '% must be 1 to 128 bytes without control characters, got "%" (% bytes)',
        p_what,
        pg_catalog.regexp_replace(pg_catalog.left(coalesce(p_value, 'NULL'), 64), '[\x01-\x1f\x7f\u0080-\u009f]', '?', 'g')
            || CASE WHEN pg_catalog.length(p_value) > 64 THEN '...' ELSE '' END,
        coalesce(pg_catalog.octet_length(p_value), 0)
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

CREATE OR REPLACE FUNCTION backoff._check_name(p_what text, p_value text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN pg_catalog.octet_length(p_value) BETWEEN 1 AND 128
             AND p_value OPERATOR(pg_catalog.!~) '[\x01-\x1f\x7f\u0080-\u009f]'
        THEN p_value
        ELSE backoff._bad_name(p_what, p_value)
    END
$$;

-- backoff._error_text(text): an error text as it is stored in last_error
-- and in the history (docs/reliability.md): at most 8192 bytes; a longer text is
-- cut at a character boundary and ends with the marker
-- " [truncated: N bytes]" (N = the original size), so that 20 history
-- entries hold at most about 160 KiB whatever a worker sends. (NUL and
-- invalid UTF-8 cannot reach the server as text; the Go client replaces
-- them before sending.) Private; used by fail.
CREATE OR REPLACE FUNCTION backoff._error_text(p_error text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_size integer := pg_catalog.octet_length(p_error);
    v_text text;
BEGIN
    IF v_size IS NULL OR v_size <= 8192 THEN
        RETURN p_error;
    END IF;
    -- 8192 bytes in all, marker included (the marker is under 40 bytes).
    v_text := pg_catalog.left(p_error, 8150);
    WHILE pg_catalog.octet_length(v_text) > 8150 LOOP
        -- A character is 1 to 4 bytes: dropping a quarter of the excess
        -- (at least one character) never overshoots by much.
        v_text := pg_catalog.left(v_text, pg_catalog.length(v_text)
            - greatest((pg_catalog.octet_length(v_text) - 8150 + 3) / 4, 1));
    END LOOP;
    RETURN v_text || ' [truncated: ' || v_size || ' bytes]';
END
$$;

-- backoff._queue_scope(privilege): the queues the caller may act on with
-- p_privilege ('produce' or 'work'), as LIKE patterns, or NULL when the
-- caller is not scoped (docs/adr/0038-queue-scoped-privileges.md).
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
-- Cost: with no grants at all, one probe of an empty table; with grants, a
-- superuser login stops there too, any other caller scans the grants table
-- once per identity with pg_has_role (cached membership). Private; called
-- once per call by backoff._check_queue and reap.
CREATE OR REPLACE FUNCTION backoff._queue_scope(p_privilege text)
RETURNS text[]
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    -- The SET ROLE role, if any. The GUC is_superuser describes the
    -- caller's effective role (this role, else the login) even inside a
    -- SECURITY DEFINER function, at no cost.
    v_set_role name := NULLIF(pg_catalog.current_setting('role'), 'none');
    v_super    boolean := pg_catalog.current_setting('is_superuser') = 'on';
    v_who      name;
    v_n        bigint;
    v_scope    text[];
BEGIN
    IF NOT EXISTS (SELECT FROM backoff.queue_grants) THEN
        RETURN NULL;
    END IF;
    IF v_set_role IS NULL AND v_super THEN
        RETURN NULL;  -- a superuser login
    END IF;
    FOREACH v_who IN ARRAY ARRAY[session_user, v_set_role]::name[] LOOP
        CONTINUE WHEN v_who IS NULL;
        -- One scan of the (small) grants table: is v_who scoped, and to what?
        SELECT count(*), coalesce(pg_catalog.array_agg(g.pattern) FILTER (WHERE g.privilege = p_privilege), '{}')
        INTO v_n, v_scope
        FROM backoff.queue_grants AS g
        WHERE pg_catalog.pg_has_role(v_who, g.role, 'MEMBER');
        CONTINUE WHEN v_n = 0;
        -- Superusers are members of every role: never scoped. The SET ROLE
        -- role's status is v_super; the login's needs the catalog (only
        -- when it is a member of a granted role).
        CONTINUE WHEN CASE WHEN v_who = v_set_role OR v_set_role IS NULL THEN v_super
                           ELSE coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = v_who), true) END;
        RETURN v_scope;
    END LOOP;
    RETURN NULL;
END
$$;

-- backoff._check_queue(queues, privilege): raise 42501
-- (insufficient_privilege) naming the first queue of p_queues the caller may
-- not act on with p_privilege (backoff._queue_scope; docs/adr/0038). Nothing
-- to check for an unscoped caller. Private; enqueue checks the queues it
-- inserts into ('produce'), claim its queue and the by-id functions the
-- queue of the job they touch ('work'). They call it as
--   PERFORM backoff._check_queue(...) WHERE EXISTS (SELECT FROM backoff.queue_grants)
-- so that without any grant (nobody is scoped) the hot path pays one probe
-- of the empty table, not two PL/pgSQL calls.
CREATE OR REPLACE FUNCTION backoff._check_queue(p_queues text[], p_privilege text)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_scope text[] := backoff._queue_scope(p_privilege);
    v_queue text;
BEGIN
    IF v_scope IS NULL THEN
        RETURN;
    END IF;
    SELECT q INTO v_queue
    FROM pg_catalog.unnest(p_queues) AS q
    WHERE NOT q OPERATOR(pg_catalog.~~) ANY (v_scope)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied: role "%" may not % queue "%"',
            coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user),
            CASE p_privilege WHEN 'produce' THEN 'produce into' ELSE 'work on' END, v_queue
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'backoff.grant_queue(role, queue, ''' || p_privilege || ''') allows it';
    END IF;
END
$$;

-- backoff._visible_queues(): the LIKE patterns of the queues whose jobs the
-- caller may read through the row-level security policy of backoff.jobs
-- (its 'work' scope), or NULL for every queue. SECURITY DEFINER because the
-- policy runs as the reading role, which may not read backoff.queue_grants;
-- private, executable by backoff_worker only
-- (docs/adr/0038-queue-scoped-privileges.md).
CREATE OR REPLACE FUNCTION backoff._visible_queues()
RETURNS text[]
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._queue_scope('work')
$$;

-- backoff.wait_for_jobs(queue, worker, ttl): register that p_worker waits
-- for jobs of p_queue until now() + p_ttl, so that backoff.enqueue notifies
-- channel backoff_jobs for this queue (docs/adr/0027). A worker writes it
-- only when a claim found the queue empty, never while busy. The
-- registration follows the database's clock, not p_now: it is about live
-- connections, not about the jobs' simulated time.
CREATE OR REPLACE FUNCTION backoff.wait_for_jobs(
    p_queue  text,
    p_worker text,
    p_ttl    interval DEFAULT interval '1 minute'
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_until timestamptz;
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_worker IS NULL THEN
        RAISE EXCEPTION 'wait for jobs in queue "%": worker must not be null', p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'wait for jobs in queue "%": ttl must be positive and at most 1 day, got "%"', p_queue, coalesce(p_ttl::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_until := pg_catalog.now() + p_ttl;
    INSERT INTO backoff.waiting_workers AS w (queue, worker, expires_at)
    VALUES (p_queue, p_worker, v_until)
    ON CONFLICT (queue, worker) DO UPDATE SET expires_at = excluded.expires_at;
    -- Registrations of workers that died, while we are here.
    DELETE FROM backoff.waiting_workers AS w
    WHERE w.queue = p_queue AND w.expires_at < pg_catalog.now();
    RETURN v_until;
END
$$;

COMMENT ON FUNCTION backoff.wait_for_jobs(text, text, interval) IS
'Register that p_worker waits for jobs of p_queue until now() + p_ttl (1 minute by default, at most 1 day): while a registration of the queue is live, backoff.enqueue notifies channel backoff_jobs with the queue name when it adds a job due now. A worker calls it when a claim found the queue empty, then claims once more and LISTENs; it ends the registration with backoff.stop_waiting when busy again. Expired registrations of the queue are deleted. Returns the expiry.
Errors: 22023 for a NULL or empty queue, a NULL worker, a ttl that is NULL, not positive or over 1 day.
Example:
LISTEN backoff_jobs;
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'', interval ''30 seconds'');
SELECT count(*) FROM backoff.claim(''emails'', ''worker-1'', 10);  -- look once more, then wait for a notification';

-- backoff.stop_waiting(queue, worker): end p_worker's registration for
-- p_queue (backoff.wait_for_jobs), so enqueue stops notifying for it.
CREATE OR REPLACE FUNCTION backoff.stop_waiting(
    p_queue  text,
    p_worker text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_worker IS NULL THEN
        RAISE EXCEPTION 'stop waiting in queue "%": worker must not be null', p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM backoff.waiting_workers AS w WHERE w.queue = p_queue AND w.worker = p_worker;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.stop_waiting(text, text) IS
'End p_worker''s registration for p_queue (see backoff.wait_for_jobs): enqueue no longer notifies on its behalf. A worker calls it when a claim comes back full (the queue is busy) and at shutdown. Returns whether a registration existed.
Errors: 22023 for a NULL or empty queue, a NULL worker.
Example:
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'');
SELECT backoff.stop_waiting(''emails'', ''worker-1'');  -- true';

-- backoff.enqueue(queue, payload, run_at, max_attempts, priority, dedupe_key,
-- now, policy): insert a job and return its id. The job records p_policy,
-- else the policy of its queue at this moment
-- (docs/adr/0008-single-retry-decision.md). p_policy follows p_now, against
-- the p_now-last convention, so that positional calls written before it
-- existed keep their meaning (DESIGN §4: optional parameters at the end). A dedupe
-- key that matches an unfinished job of the same queue returns that job's
-- id and inserts nothing. A job due now wakes listeners of channel
-- 'backoff_jobs' (payload: the queue name) when a worker has registered
-- that it waits for the queue (backoff.wait_for_jobs); a busy system, whose
-- workers do not wait, takes no notify lock. PostgreSQL delivers identical
-- notifications of one transaction once, so a bulk enqueue sends one per
-- queue.
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queue        text,
    p_payload      jsonb DEFAULT '{}',
    p_run_at       timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL,
    p_priority     integer DEFAULT 0,
    p_dedupe_key   text DEFAULT NULL,
    p_now          timestamptz DEFAULT now(),
    p_policy       text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id      bigint;
    v_run_at  timestamptz;
    v_scoped  boolean;
    v_waiting boolean;
BEGIN
    p_now := backoff._now(p_now);
    v_run_at := coalesce(p_run_at, p_now);
    p_queue := backoff._check_name('queue', p_queue);
    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_run_at < '0001-01-01 00:00:00+00' OR p_run_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at must be a finite time in years 1 to 9999, got "%"', p_run_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_dedupe_key = '' THEN
        RAISE EXCEPTION 'dedupe key must be NULL or non-empty, got ""'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_dedupe_key IS NOT NULL THEN
        p_dedupe_key := backoff._check_name('dedupe key', p_dedupe_key);
    END IF;
    IF p_policy IS NOT NULL THEN
        p_policy := backoff._check_name('policy', p_policy);
        IF NOT EXISTS (SELECT 1 FROM backoff.policies AS p WHERE p.name = p_policy) THEN
            RAISE EXCEPTION 'unknown policy "%"', p_policy
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_dedupe_key IS NULL THEN
        -- The common case in one statement (one executor start, profile in
        -- docs/benchmarks.md): the job, and two probes in its RETURNING: is
        -- any caller scoped by queue grants, and does a worker wait for this
        -- queue (then a job due now notifies it at commit, docs/adr/0027).
        INSERT INTO backoff.jobs (queue, payload, priority, max_attempts, policy, run_at, created_at)
        SELECT p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts, g.name, v_run_at, p_now
        FROM backoff._governing_policy(p_policy, p_queue) AS g
        RETURNING id,
                  EXISTS (SELECT FROM backoff.queue_grants),
                  EXISTS (SELECT FROM backoff.waiting_workers AS w
                          WHERE w.queue = p_queue AND w.expires_at > pg_catalog.now())
        INTO v_id, v_scoped, v_waiting;
        IF v_scoped THEN
            -- 42501 for a caller that may not produce into p_queue: the
            -- error undoes the INSERT.
            PERFORM backoff._check_queue(ARRAY[p_queue], 'produce');
        END IF;
        IF v_waiting AND v_run_at <= p_now THEN
            PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
        END IF;
        RETURN v_id;
    END IF;

    -- With a dedupe key the grants are checked first: a caller that may not
    -- produce into p_queue must not learn the id of its job with that key.
    SELECT EXISTS (SELECT FROM backoff.queue_grants),
           v_run_at <= p_now AND EXISTS (SELECT FROM backoff.waiting_workers AS w
                                         WHERE w.queue = p_queue AND w.expires_at > pg_catalog.now())
    INTO v_scoped, v_waiting;
    IF v_scoped THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'produce');
    END IF;
    FOR v_try IN 1..10 LOOP
        INSERT INTO backoff.jobs (queue, payload, priority, max_attempts, policy, run_at, created_at, dedupe_key)
        SELECT p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts, g.name, v_run_at, p_now,
               p_dedupe_key
        FROM backoff._governing_policy(p_policy, p_queue) AS g
        ON CONFLICT (queue, dedupe_key)
            WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying')
            DO NOTHING
        RETURNING id INTO v_id;
        IF v_id IS NOT NULL THEN
            IF v_waiting THEN
                PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
            END IF;
            RETURN v_id;
        END IF;
        -- The key is taken by an unfinished job: return it. If that job
        -- finished between the INSERT and this SELECT, insert again.
        SELECT j.id INTO v_id
        FROM backoff.jobs AS j
        WHERE j.queue = p_queue AND j.dedupe_key = p_dedupe_key
          AND j.status IN ('pending', 'running', 'retrying');
        IF v_id IS NOT NULL THEN
            RETURN v_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'enqueue in queue "%": dedupe key "%" kept changing hands', p_queue, p_dedupe_key
        USING ERRCODE = 'serialization_failure';
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text, jsonb, timestamptz, integer, integer, text, timestamptz, text) IS
'Insert a job into p_queue and return its id. p_payload (jsonb, NULL = {}), p_run_at (first run; NULL = p_now), p_max_attempts (NULL = the policy''s), p_priority (higher first; NULL = 0), p_dedupe_key (while a job of this queue with that key is pending, running or retrying, return its id and insert nothing), p_now (created_at), p_policy (the policy of this job; NULL = its queue''s, from backoff.queues, else ''default''; it comes after p_now so that positional calls keep working, so pass it by name). The job records that policy: remapping the queue later does not change it. A deduplicated call returns the existing job unchanged, whatever p_policy says. A job due now notifies channel backoff_jobs with the queue name as payload, once per transaction and queue, when a worker waits for the queue (backoff.wait_for_jobs).
Errors: 22023 for a queue, dedupe key or policy that is not 1 to 128 bytes without control characters, max_attempts < 1, an empty dedupe key, a run_at outside years 1 to 9999, a p_policy that names no row of backoff.policies, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock. 42501 when the caller is scoped by backoff.grant_queue and may not produce into p_queue.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT backoff.enqueue(''reports'', p_policy => ''conservative'');
SELECT id, queue, policy FROM backoff.jobs ORDER BY id;';

-- backoff.enqueue(queues[], payloads[], run_ats[], max_attempts[],
-- priorities[], dedupe_keys[], now, policies[]): the bulk form, element i of every
-- array describing job i; returns the ids in input order. It has exactly
-- the single-job form's semantics, but a batch without dedupe keys is
-- inserted by ONE set-based INSERT instead of one INSERT per job (about 5x
-- fewer server cycles per job; docs/adr/0016-set-based-bulk-enqueue.md). A
-- batch with a dedupe key goes through the single-job form element by
-- element, which handles the key's conflicts and races. The ids are drawn
-- from the identity sequence before the INSERT so that each one is tied to
-- its element whatever order the rows are inserted in. The checks work on
-- whole arrays and the governing policy is looked up once per distinct
-- (queue, policy), so the cost per job stays close to a hand-written
-- multi-row INSERT's (docs/benchmarks.md).
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queues       text[],
    p_payloads     jsonb[],
    p_run_ats      timestamptz[],
    p_max_attempts integer[],
    p_priorities   integer[],
    p_dedupe_keys  text[],
    p_now          timestamptz DEFAULT now(),
    p_policies     text[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Its statements read only whole arrays and the small policy, queue and
-- waiting-worker tables: one generic plan each, never re-planned per call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n    integer := coalesce(cardinality(p_queues), 0);
    v_due  text[]  := p_queues;
    v_dims integer := greatest(array_ndims(p_queues), array_ndims(p_payloads), array_ndims(p_run_ats),
                               array_ndims(p_max_attempts), array_ndims(p_priorities), array_ndims(p_dedupe_keys),
                               array_ndims(p_policies));
BEGIN
    p_now := backoff._now(p_now);
    IF p_queues IS NULL
       OR coalesce(cardinality(p_payloads), v_n) <> v_n OR coalesce(cardinality(p_run_ats), v_n) <> v_n
       OR coalesce(cardinality(p_max_attempts), v_n) <> v_n OR coalesce(cardinality(p_priorities), v_n) <> v_n
       OR coalesce(cardinality(p_dedupe_keys), v_n) <> v_n OR coalesce(cardinality(p_policies), v_n) <> v_n THEN
        RAISE EXCEPTION 'enqueue: the arrays must not be null (queues) and must have the same length, got "%" queues', coalesce(v_n::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A job per element of one dimension (the array functions below refuse
    -- more with 0A000, and a flattened matrix is no batch anyone meant).
    IF v_dims > 1 THEN
        RAISE EXCEPTION 'enqueue: the arrays must have one dimension, got one with "%"', v_dims
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The checks below work on whole arrays (ANY, array_remove,
    -- array_to_string) rather than scanning unnest once per check, and an
    -- array of NULLs, which a client may send for a field it does not set,
    -- costs about what a NULL array costs (profile in docs/benchmarks.md).
    IF pg_catalog.cardinality(pg_catalog.array_remove(p_dedupe_keys, NULL)) > 0 THEN
        RETURN QUERY
        SELECT backoff.enqueue(t.queue, t.payload, t.run_at, t.max_attempts, t.priority, t.dedupe_key, p_now, t.policy)
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, dedupe_key, policy, ord)
        ORDER BY t.ord;
        RETURN;
    END IF;
    -- Names: a NULL, a control character anywhere in the batch (one match
    -- over the names joined), or a length outside 1 to 128 bytes; the first
    -- bad one is reported by the single-name check.
    IF pg_catalog.array_position(p_queues, NULL) IS NOT NULL
       OR pg_catalog.array_to_string(p_queues, '') ~ '[\x01-\x1f\x7f\u0080-\u009f]'
       OR EXISTS (SELECT FROM unnest(p_queues) AS q WHERE octet_length(q) NOT BETWEEN 1 AND 128) THEN
        PERFORM backoff._check_name('queue', q)
        FROM unnest(p_queues) AS q
        WHERE q IS NULL OR octet_length(q) NOT BETWEEN 1 AND 128 OR q ~ '[\x01-\x1f\x7f\u0080-\u009f]';
    END IF;
    IF 1 > ANY (p_max_attempts) THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"',
            (SELECT min(m) FROM unnest(p_max_attempts) AS m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF '0001-01-01 00:00:00+00' > ANY (p_run_ats) OR '10000-01-01 00:00:00+00' <= ANY (p_run_ats) THEN
        RAISE EXCEPTION 'run_at must be a finite time in years 1 to 9999, got "%"',
            (SELECT r FROM unnest(p_run_ats) AS r WHERE r < '0001-01-01 00:00:00+00' OR r >= '10000-01-01 00:00:00+00' LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(pg_catalog.array_remove(p_policies, NULL)) > 0 THEN
        PERFORM backoff._check_name('policy', n) FROM unnest(p_policies) AS n WHERE n IS NOT NULL;
        IF EXISTS (SELECT FROM unnest(p_policies) AS n
                   WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n)) THEN
            RAISE EXCEPTION 'unknown policy "%"',
                (SELECT n FROM unnest(p_policies) AS n
                 WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n) LIMIT 1)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    PERFORM backoff._check_queue(p_queues, 'produce') WHERE EXISTS (SELECT FROM backoff.queue_grants);

    -- The governing policy is looked up once per distinct (queue, policy)
    -- of the batch, not once per job. '' stands for "no policy of its own"
    -- in the join key ('' is not a valid policy name), so the join hashes.
    RETURN QUERY
    WITH src AS MATERIALIZED (
        SELECT t.ord, pg_catalog.nextval('backoff.jobs_id_seq'::regclass) AS id,
               t.queue, t.payload, coalesce(t.run_at, p_now) AS run_at, t.max_attempts, t.priority,
               coalesce(t.policy, '') AS policy
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, policy, ord)
    ), governing AS MATERIALIZED (
        SELECT d.queue, d.policy, g.name
        FROM (SELECT DISTINCT s.queue, s.policy FROM src AS s) AS d
        CROSS JOIN LATERAL backoff._governing_policy(nullif(d.policy, ''), d.queue) AS g
    ), ins AS (
        INSERT INTO backoff.jobs (id, queue, payload, priority, max_attempts, policy, run_at, created_at)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.queue, coalesce(s.payload, '{}'), coalesce(s.priority, 0), s.max_attempts,
               g.name, s.run_at, p_now
        FROM src AS s
        JOIN governing AS g ON g.queue = s.queue AND g.policy = s.policy
    )
    SELECT s.id FROM src AS s ORDER BY s.ord;

    -- Wake the workers waiting for a queue with a job due now: a scan of
    -- the few waiting workers, not of the batch.
    IF p_now < ANY (p_run_ats) THEN
        v_due := ARRAY(SELECT t.queue FROM unnest(p_queues, p_run_ats) AS t(queue, run_at)
                       WHERE coalesce(t.run_at, p_now) <= p_now);
    END IF;
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_due) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text[], jsonb[], timestamptz[], integer[], integer[], text[], timestamptz, text[]) IS
'Bulk enqueue: insert one job per element of p_queues (element i of p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys and p_policies goes with it; every array but p_policies is required, a NULL array means all NULL; a call with only NULLs after the queues needs a cast or named arguments to pick this form) and return the ids in input order. Each job gets exactly what backoff.enqueue(p_queue, ...) would give it, dedupe included; a batch without dedupe keys is one set-based INSERT. Atomic: on error no job is added. Notifies channel backoff_jobs once per queue with a job due now and a waiting worker (backoff.wait_for_jobs).
Errors: 22023 for a NULL p_queues, arrays of different lengths or of more than one dimension, a queue, dedupe key or policy that is not 1 to 128 bytes without control characters, a max_attempts < 1, an empty dedupe key, a run_at outside years 1 to 9999, a policy that names no row of backoff.policies, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock. 42501 when the caller is scoped by backoff.grant_queue and may not produce into one of the queues.
Example:
SELECT * FROM backoff.enqueue(ARRAY[''emails'', ''emails'', ''sms''], ARRAY[''{"to": "a"}'', ''{"to": "b"}'', NULL]::jsonb[],
                              NULL, NULL, ARRAY[0, 5, 0], NULL);';

-- backoff._queue_burst(rate, burst): the size of a rate-limited queue's
-- token bucket (docs/adr/0045): its burst, else greatest(1, ceil(rate)),
-- at most 2147483647, an integer. Private; the one definition that claim
-- (backoff._claim_controlled), backoff.queue_state and backoff.prune read
-- the bucket through, each splitting it into least(16, burst) slots. One
-- expression, so it is inlined.
CREATE OR REPLACE FUNCTION backoff._queue_burst(p_rate double precision, p_burst integer)
RETURNS integer
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_burst, least(greatest(1, pg_catalog.ceil(p_rate)), 2147483647)::integer)
$$;

-- backoff._claim_controlled(queue, worker, limit, lease, now, queue row):
-- claim for a queue under controls (docs/adr/0045): a rate, or a breaker
-- that is open or half open. Private; backoff.claim calls it, with its
-- checked arguments and the queue's row, only when its fast statement
-- claimed nothing for such a queue. It never waits for another claimer:
-- a state row or bucket slot another transaction holds is skipped.
--   breaker open (now < half_open_at)  -> nothing.
--   breaker half open                  -> the state row is locked (only
--       here) with SKIP LOCKED: held by another transaction, nothing now;
--       else concurrent claimers hand out exactly probes_left jobs in
--       total: at most that many, and probes_left goes down by the number
--       claimed. The lock is held to the end of the claim's transaction.
--       When every probe is out and none of them is running any more
--       (reaped, snoozed or cancelled: no result), a new set is handed out,
--       so a probe whose worker died cannot keep the queue shut. A probe's
--       failure that fail logged because this row was busy reopens it.
--   rate                               -> the bucket is n = least(16,
--       burst) slot rows, each with its share of the burst and of the rate
--       (the shares add up to burst and rate). Free slots are locked
--       fullest first (FOR UPDATE SKIP LOCKED) until their whole tokens
--       cover the limit, each refilled lazily from p_now; at most those
--       whole tokens are claimed, and the slots lose only the tokens of
--       the jobs actually claimed, fullest first (the rest are never taken
--       off). One row update per slot taken from, none when nothing was
--       claimed. A new bucket's slots are created full by one claimer
--       (elected with a try-lock, so no claimer waits).
-- Locks are taken in one order (breaker, then slots), all without
-- waiting; claim never waits for a job row (SKIP LOCKED).
CREATE OR REPLACE FUNCTION backoff._claim_controlled(
    p_queue  text,
    p_worker text,
    p_limit  integer,
    p_lease  interval,
    p_now    timestamptz,
    p_q      backoff.queues
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_allow    integer := p_limit;
    v_state    backoff.queue_breakers;
    v_probes   integer;
    v_failed   timestamptz;
    v_burst    integer;
    v_nslots   integer;
    v_pass     integer;
    v_cur      refcursor;
    v_slot     smallint;
    v_avail    double precision;
    v_sum      double precision;
    v_slots    smallint[];
    v_avails   double precision[];
    v_left     double precision;
    v_take     double precision;
    v_wslots   smallint[];
    v_wtokens  double precision[];
    v_count    integer;
    v_jobs     backoff.jobs[];
    v_ids      bigint[];
BEGIN
    IF p_q.breaker_failures IS NOT NULL THEN
        SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        IF v_state.opened_at IS NOT NULL THEN
            IF p_now < v_state.half_open_at THEN
                RETURN;  -- open
            END IF;
            -- Half open: count the probes under the row's lock, on its
            -- latest version (a fail may have reopened it, a complete closed
            -- it). A row another transaction holds (a claim handing out
            -- probes, a fail reopening, a complete closing) gives nothing
            -- now rather than a wait.
            SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue
            FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                RETURN;
            END IF;
            IF v_state.opened_at IS NOT NULL THEN
                IF p_now < v_state.half_open_at THEN
                    RETURN;
                END IF;
                -- A probe's fail that found this row locked logged its
                -- failure instead of reopening (backoff._breaker_failure):
                -- reopen on its behalf, from the time it failed.
                SELECT pg_catalog.max(f.failed_at) INTO v_failed
                FROM backoff.queue_failures AS f
                WHERE f.queue = p_queue AND f.failed_at >= v_state.half_open_at
                  AND f.failed_at > v_state.counted_from;
                IF v_failed IS NOT NULL THEN
                    UPDATE backoff.queue_breakers AS b
                    SET opened_at = v_failed,
                        half_open_at = backoff._clamp_time(v_failed + p_q.breaker_cooldown),
                        probes_left = NULL,
                        probe_ids = NULL,
                        counted_from = v_failed
                    WHERE b.queue = p_queue;
                    RETURN;
                END IF;
                v_probes := coalesce(v_state.probes_left, p_q.breaker_probes);
                v_ids := coalesce(v_state.probe_ids, '{}');
                IF v_probes < 1 THEN
                    IF EXISTS (SELECT FROM backoff.jobs AS j
                               WHERE j.id = ANY (v_state.probe_ids) AND j.status = 'running') THEN
                        RETURN;  -- every probe is out: wait for a result
                    END IF;
                    v_probes := p_q.breaker_probes;
                    v_ids := '{}';
                END IF;
                v_allow := least(v_allow, v_probes);
            END IF;
        END IF;
    END IF;

    IF p_q.rate IS NOT NULL THEN
        v_burst := backoff._queue_burst(p_q.rate, p_q.burst);
        v_nslots := least(16, v_burst);
        FOR v_pass IN 1..2 LOOP
            -- Take free slots, fullest first, until their whole tokens
            -- cover the limit; a slot another claimer holds is skipped
            -- (never waited for). Each slot's tokens are refilled lazily
            -- from p_now at its share of the rate, up to its share of the
            -- burst; a clock behind refilled_at adds nothing.
            v_sum := 0;
            v_slots := '{}';
            v_avails := '{}';
            OPEN v_cur FOR
                SELECT t.slot,
                       least(v_burst / v_nslots + (t.slot < v_burst % v_nslots)::integer,
                             t.tokens + p_q.rate * (v_burst / v_nslots + (t.slot < v_burst % v_nslots)::integer) / v_burst
                                 * greatest(0, extract(epoch FROM p_now - t.refilled_at)::double precision)) AS avail
                FROM backoff.queue_tokens AS t
                WHERE t.queue = p_queue AND t.slot < v_nslots
                ORDER BY 2 DESC, t.slot DESC
                FOR UPDATE OF t SKIP LOCKED;
            LOOP
                FETCH v_cur INTO v_slot, v_avail;
                EXIT WHEN NOT FOUND;
                v_slots := v_slots || v_slot;
                v_avails := v_avails || v_avail;
                v_sum := v_sum + v_avail;
                -- (1e-9: a slot's share of the rate is a fraction, so a sum
                -- of refills can fall a rounding error short of a token.)
                EXIT WHEN v_sum + 1e-9 >= v_allow;
            END LOOP;
            CLOSE v_cur;
            EXIT WHEN v_sum + 1e-9 >= v_allow OR v_pass = 2;
            -- Fewer tokens than asked: create the slots a new bucket lacks
            -- (full). One creator at a time, elected without waiting: a
            -- claimer that loses gets what it holds now.
            EXIT WHEN (SELECT pg_catalog.count(*) FROM backoff.queue_tokens AS t
                       WHERE t.queue = p_queue AND t.slot < v_nslots) >= v_nslots;
            EXIT WHEN NOT pg_catalog.pg_try_advisory_xact_lock(
                pg_catalog.hashtext('backoff.queue_tokens'), pg_catalog.hashtext(p_queue));
            INSERT INTO backoff.queue_tokens (queue, slot, tokens, refilled_at)
            SELECT p_queue, s.slot, v_burst / v_nslots + (s.slot < v_burst % v_nslots)::integer, p_now
            FROM pg_catalog.generate_series(0, v_nslots - 1) AS s(slot)
            ON CONFLICT (queue, slot) DO NOTHING;
        END LOOP;
        v_allow := least(v_allow::double precision, floor(v_sum + 1e-9))::integer;
        IF v_allow < 1 THEN
            RETURN;
        END IF;
    END IF;

    -- backoff.claim's statement, with the allowance as its limit. Without
    -- probes to record, the rows go straight to the result (RETURN QUERY,
    -- counted afterwards); a half-open breaker's claim keeps them to record
    -- the probes' ids.
    IF v_probes IS NULL THEN
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT v_allow
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count = 0 THEN
            RETURN;
        END IF;
    ELSE
        WITH claimed AS (
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT v_allow
            FOR UPDATE SKIP LOCKED))
        RETURNING j AS job)
        SELECT pg_catalog.array_agg(c.job) INTO v_jobs FROM claimed AS c;
        v_count := coalesce(pg_catalog.cardinality(v_jobs), 0);
        IF v_count = 0 THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT * FROM pg_catalog.unnest(v_jobs);
    END IF;
    IF v_probes IS NOT NULL THEN
        UPDATE backoff.queue_breakers AS b
        SET probes_left = v_probes - v_count,
            probe_ids = v_ids || ARRAY(SELECT r.id FROM pg_catalog.unnest(v_jobs) AS r)
        WHERE b.queue = p_queue;
    END IF;
    IF p_q.rate IS NOT NULL THEN
        -- Take the claimed jobs' tokens from the slots held, fullest first;
        -- a slot nothing was taken from is not written.
        v_left := v_count;
        v_wslots := '{}';
        v_wtokens := '{}';
        FOR i IN 1 .. pg_catalog.cardinality(v_slots) LOOP
            EXIT WHEN v_left <= 0;
            v_take := least(v_left, v_avails[i]);
            v_wslots := v_wslots || v_slots[i];
            v_wtokens := v_wtokens || greatest(0, v_avails[i] - v_take);
            v_left := v_left - v_take;
        END LOOP;
        IF pg_catalog.cardinality(v_wslots) = 1 THEN  -- the usual case
            UPDATE backoff.queue_tokens AS t
            SET tokens = v_wtokens[1], refilled_at = greatest(t.refilled_at, p_now)
            WHERE t.queue = p_queue AND t.slot = v_wslots[1];
            RETURN;
        END IF;
        UPDATE backoff.queue_tokens AS t
        SET tokens = w.tokens, refilled_at = greatest(t.refilled_at, p_now)
        FROM ROWS FROM (pg_catalog.unnest(v_wslots), pg_catalog.unnest(v_wtokens)) AS w(slot, tokens)
        WHERE t.queue = p_queue AND t.slot = w.slot;
    END IF;
END
$$;

-- backoff.claim(queue, worker, limit, lease, now): claim up to p_limit due
-- jobs of a queue in one UPDATE. The candidates are locked with
-- FOR UPDATE SKIP LOCKED, so concurrent claimers never wait for, nor share,
-- a row. Hot path: one statement, no extra queries.
--
-- Plan notes (docs/design.md §10): the candidates are collected into an
-- array (an InitPlan) and the UPDATE finds them with id = ANY(array) on the
-- primary key. The usual id IN (SELECT ... LIMIT p_limit FOR UPDATE SKIP
-- LOCKED) can get a generic plan that hash-joins a sequential scan of the
-- whole table. The lease comes from the job's recorded policy, one
-- primary-key look-up, so that a claimed row costs no PL/pgSQL call (profile
-- in docs/adr/0041); backoff._job_policy, the governing policy's answer, is
-- only reached when that row is gone (a policy deleted after the job was
-- enqueued: its queue's, else 'default', else 22023). A paused queue
-- (backoff.queues.paused) gives nothing.
--
-- Queue controls (docs/adr/0045): the fast statement's probe of
-- backoff.queues also gives nothing for a queue with a rate or with a
-- breaker that is not closed (the breaker's state row is only read for a
-- queue row with breaker_failures set; a closed breaker does not hold
-- claims back, so it takes the fast statement too). Only when the fast
-- statement claimed nothing does claim look at the queue's row again and,
-- for such a queue that is not paused, take backoff._claim_controlled. A
-- queue without controls pays nothing more while it has due jobs; the
-- probe is a one-time filter, so a held queue's fast statement reads no
-- job.
CREATE OR REPLACE FUNCTION backoff.claim(
    p_queue  text,
    p_worker text,
    p_limit  integer DEFAULT 1,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_controls backoff.queues;
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_worker := backoff._check_name('worker', p_worker);
    IF p_queue IS NULL OR p_queue = '' OR p_worker IS NULL OR p_limit IS NULL OR p_limit < 1
       OR p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        IF p_queue IS NULL OR p_queue = '' THEN
            RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_worker IS NULL THEN
            RAISE EXCEPTION 'claim in queue "%": worker must not be null', p_queue
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_limit IS NULL OR p_limit < 1 THEN
            RAISE EXCEPTION 'claim in queue "%": limit must be at least 1, got "%"', p_queue, coalesce(p_limit::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE EXCEPTION 'claim in queue "%": lease must be positive and at most 876600 hours, got "%"', p_queue, p_lease
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    p_now := backoff._now(p_now);

    PERFORM backoff._check_queue(ARRAY[p_queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);

    -- The same statement twice, with LIMIT 1 and with LIMIT p_limit. A
    -- parameter in LIMIT makes the generic plan look expensive (the planner
    -- assumes it keeps 10% of the rows), so the plan cache would plan the
    -- statement again on every call; with a constant it keeps one generic
    -- plan, which matters for one job per call. A batch amortizes planning.
    IF p_limit = 1 THEN
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT EXISTS (SELECT FROM backoff.queues AS q
                              WHERE q.name = p_queue
                                AND (q.paused OR q.rate IS NOT NULL
                                        OR (q.breaker_failures IS NOT NULL
                                            AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                                                        WHERE b.queue = q.name AND b.opened_at IS NOT NULL))))
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    ELSE
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT EXISTS (SELECT FROM backoff.queues AS q
                              WHERE q.name = p_queue
                                AND (q.paused OR q.rate IS NOT NULL
                                        OR (q.breaker_failures IS NOT NULL
                                            AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                                                        WHERE b.queue = q.name AND b.opened_at IS NOT NULL))))
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    END IF;
    IF FOUND THEN
        RETURN;
    END IF;

    -- Nothing claimed: the queue is empty, paused, or under controls (a
    -- rate, or a breaker that is not closed), which the statement above
    -- leaves to this path. Only now do controls cost a query.
    SELECT q.* INTO v_controls
    FROM backoff.queues AS q
    WHERE q.name = p_queue
      AND NOT q.paused
      AND (q.rate IS NOT NULL
           OR (q.breaker_failures IS NOT NULL
               AND EXISTS (SELECT FROM backoff.queue_breakers AS b WHERE b.queue = q.name AND b.opened_at IS NOT NULL)));
    IF FOUND THEN
        RETURN QUERY SELECT * FROM backoff._claim_controlled(p_queue, p_worker, p_limit, p_lease, p_now, v_controls);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.claim(text, text, integer, interval, timestamptz) IS
'Claim up to p_limit due jobs (status pending or retrying, run_at <= p_now) of p_queue for p_worker: higher priority first, then earliest run_at, then id. Each becomes running with attempts + 1 (attempts counts every claim of the job and never goes down, so the new value is a fencing token no other claim of the job has: pass it to complete, fail, heartbeat and snooze; the counted attempt that max_attempts bounds is attempts - uncounted_attempts), lease_until = p_now + (p_lease, else the job''s policy lease), locked_by = p_worker, last_attempted_at = p_now. Rows locked by other claimers are skipped (FOR UPDATE SKIP LOCKED), so concurrent claims never overlap. A paused queue (backoff.queues.paused) gives no rows. Queue controls (backoff.queues): with an open circuit breaker no rows; half open, at most breaker_probes jobs in total until a complete or fail of the queue closes or reopens it (exact under concurrency; a claim that finds the breaker''s state held by a concurrent transaction gets no rows now); with a rate, at most the whole tokens of the queue''s bucket (rate per second, burst) that concurrent claims do not hold (the bucket is split into up to 16 slots), so fewer rows than p_limit, never waiting. backoff.queue_state says when a claim can return jobs again.
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control characters, a limit < 1, a lease <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on p_queue. lease_until stays within year 9999.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT id, status, attempts, payload, lease_until - now() AS lease FROM backoff.claim(''emails'', ''worker-1'', 10);';

-- backoff.acquire(job id, worker, lease, now): claim one given job if it is
-- due, for workflow engines that choose the step themselves
-- (docs/adr/0010-acquire-by-id.md). One guarded UPDATE; only when it
-- matches nothing is the row read to choose the error, so two workers
-- acquiring the same job get exactly one winner: the other waits for the
-- winner's row lock and then sees a running job (BK002).
CREATE OR REPLACE FUNCTION backoff.acquire(
    p_job_id bigint,
    p_worker text,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot acquire job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_worker := backoff._check_name('worker', p_worker);
    IF p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        RAISE EXCEPTION 'cannot acquire job "%": lease must be positive and at most 876600 hours, got "%"', p_job_id, p_lease
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    UPDATE backoff.jobs AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        lease_until = backoff._clamp_time(p_now + coalesce(p_lease, (backoff._job_policy(j.policy, j.queue)).lease)),
        locked_by = p_worker,
        last_attempted_at = p_now
    WHERE j.id = p_job_id
      -- "pending or retrying", spelled so that it does not imply the
      -- predicate of jobs_claimable_idx: a generic plan would otherwise
      -- scan every due job of that index for this one id.
      AND j.status NOT IN ('running', 'completed', 'dead_lettered', 'cancelled')
      AND j.run_at <= p_now
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        -- A scoped caller that acquired another queue's job: the error
        -- undoes the UPDATE (docs/adr/0038-queue-scoped-privileges.md).
        PERFORM backoff._check_queue(ARRAY[v_job.queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);
        RETURN v_job;
    END IF;

    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    PERFORM backoff._check_queue(ARRAY[v_job.queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);
    IF v_job.status = 'running' THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is running attempt "%"', p_job_id, v_job.attempts
            USING ERRCODE = 'BK002';
    END IF;
    IF v_job.status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is "%"', p_job_id, v_job.status
            USING ERRCODE = 'BK003';
    END IF;
    RAISE EXCEPTION 'job "%" is not ready until "%" (attempts "%")',
        p_job_id, backoff._iso8601(v_job.run_at), v_job.attempts
        USING ERRCODE = 'BK004',
              DETAIL = backoff._iso8601(v_job.run_at),
              HINT = format('attempts=%s', v_job.attempts);
END
$$;

COMMENT ON FUNCTION backoff.acquire(bigint, text, interval, timestamptz) IS
'Claim the job p_job_id for p_worker if it is due (pending or retrying with run_at <= p_now), exactly as claim would: running, attempts + 1 (the new value is the fencing token), lease_until = p_now + (p_lease, else the policy lease), locked_by = p_worker; returns the job. For workflow engines that pick the step themselves. Two concurrent calls on one due job: exactly one wins, the other gets BK002. A paused queue does not stop it.
Errors: BK004 not ready: message ''job "42" is not ready until "2026-01-02T03:04:05.000000Z" (attempts "2")'', DETAIL = run_at in ISO 8601 UTC, HINT = ''attempts=2''; BK002 the job is running; BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, a worker that is not 1 to 128 bytes without control characters, a lease <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on the job''s queue.
Example:
SELECT backoff.enqueue(''steps'', ''{"step": "charge"}'');
SELECT id, status, attempts, locked_by FROM backoff.acquire(1, ''orchestrator-1'');';

-- backoff.complete(job id, attempt, now): mark the running attempt p_attempt
-- of a job completed. One guarded UPDATE; the error path reads the row only
-- when it matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.complete(
    p_job_id  bigint,
    p_attempt integer,
    p_now     timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job       backoff.jobs;
    v_scoped    boolean;
    v_half_open boolean;
BEGIN
    p_now := backoff._now(p_now);
    UPDATE backoff.jobs AS j
    SET status = 'completed',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF NOT FOUND THEN
        PERFORM backoff._raise_fencing_error('complete', p_job_id, p_attempt);
    END IF;
    -- Two probes in one statement, each of a table that is empty unless the
    -- feature is used (queue grants; a breaker that opened), so that they
    -- cost a completion next to nothing then: is the caller scoped by
    -- queue grants, and is this queue's breaker half open.
    SELECT EXISTS (SELECT FROM backoff.queue_grants),
           EXISTS (SELECT FROM backoff.queue_breakers AS b
                   WHERE b.queue = v_job.queue AND b.half_open_at <= p_now)
    INTO v_scoped, v_half_open;
    IF v_scoped THEN
        -- Another queue's job: the error undoes the UPDATE.
        PERFORM backoff._check_queue(ARRAY[v_job.queue], 'work');
    END IF;
    IF v_half_open THEN
        -- A success closes the queue's half-open breaker (docs/adr/0045).
        UPDATE backoff.queue_breakers AS b
        SET opened_at = NULL, half_open_at = NULL, probes_left = NULL, probe_ids = NULL, counted_from = p_now
        WHERE b.queue = v_job.queue
          AND b.half_open_at <= p_now;
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.complete(bigint, integer, timestamptz) IS
'Mark job p_job_id completed, if it is running attempt p_attempt (the attempts value claim returned: the fencing token, which no other claim of the job ever has, across snooze, cancel and replay too). Sets completed_at = p_now, clears lease_until and locked_by; returns the job. A completed job of a queue whose circuit breaker is half open closes the breaker.
Errors: BK002 the job is live but not running this attempt (its lease was reaped, or another attempt holds it); BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id or attempt, an attempt < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on the job''s queue (nothing is changed).
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts FROM backoff.complete(1, 1);';

-- backoff.complete_many(job ids, attempts, now): complete a batch in one
-- UPDATE joined to the unnested arrays. Fenced per entry: a job not running
-- the given attempt is left alone and its id not returned.
--
-- Plan notes: jobs are found with id = ANY(p_job_ids) (the primary key) and
-- joined to the arrays by hash, never by a nested loop. Statistics taken
-- while nothing runs say status = 'running' matches about one row, so
-- without this the planner nests a scan of every running row inside a scan
-- of the arrays: running x batch comparisons, which took 4.9 s for 1,000
-- ids among 30,000 running jobs and made four Workers on one pool slower
-- than one (docs/adr/0026-worker-runner.md).
CREATE OR REPLACE FUNCTION backoff.complete_many(
    p_job_ids  bigint[],
    p_attempts integer[],
    p_now      timestamptz DEFAULT now()
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
SET enable_nestloop = off
AS $$
BEGIN
    p_now := backoff._now(p_now);
    IF p_job_ids IS NULL OR p_attempts IS NULL
       OR cardinality(p_job_ids) <> cardinality(p_attempts) THEN
        RAISE EXCEPTION 'complete_many: job ids and attempts must be arrays of equal length, got "%" and "%"',
            coalesce(cardinality(p_job_ids)::text, 'NULL'), coalesce(cardinality(p_attempts)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A scoped caller may list only jobs of its queues (one probe of the
    -- empty grants table otherwise).
    IF backoff._queue_scope('work') IS NOT NULL THEN
        PERFORM backoff._check_queue(
            ARRAY(SELECT DISTINCT j.queue FROM backoff.jobs AS j WHERE j.id = ANY (p_job_ids)), 'work');
    END IF;
    -- A success closes its queue's breaker if it is half open
    -- (docs/adr/0045): backoff.queue_breakers is probed once per call for
    -- the distinct queues of the batch, in the same statement.
    RETURN QUERY
    WITH done AS (
        UPDATE backoff.jobs AS j
        SET status = 'completed',
            completed_at = p_now,
            lease_until = NULL,
            locked_by = NULL
        FROM unnest(p_job_ids, p_attempts) AS t(id, attempt)
        WHERE j.id = ANY (p_job_ids)
          AND j.id = t.id
          AND j.attempts = t.attempt
          AND j.status = 'running'
        RETURNING j.id, j.queue
    ), closed AS (
        UPDATE backoff.queue_breakers AS b
        SET opened_at = NULL, half_open_at = NULL, probes_left = NULL, probe_ids = NULL, counted_from = p_now
        -- An array, so that the primary key finds the rows (with
        -- enable_nestloop off an IN would hash a scan of every breaker).
        WHERE b.queue = ANY (ARRAY(SELECT DISTINCT d.queue FROM done AS d))
          AND b.half_open_at <= p_now
    )
    SELECT d.id FROM done AS d;
END
$$;

COMMENT ON FUNCTION backoff.complete_many(bigint[], integer[], timestamptz) IS
'Complete a batch in one statement: p_job_ids[i] is completed if it is running attempt p_attempts[i] (completed_at = p_now, lease and locked_by cleared). Returns the ids it completed; an entry whose fencing fails (stale attempt, finished, unknown) is left untouched and not returned. The fast path for workers that claim in batches. A completed job of a queue whose circuit breaker is half open closes the breaker.
Errors: 22023 for NULL arrays, arrays of different lengths, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and one of the ids is a job of a queue it may not work on (nothing is completed).
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 3);
SELECT * FROM backoff.complete_many(ARRAY[1, 2, 3], ARRAY[1, 1, 2]);  -- job 3 ran attempt 1, not 2';

-- backoff._breaker_failure(queue, failures, window, cooldown, now): count a
-- failed attempt of a queue with a circuit breaker (docs/adr/0045).
-- Private; called by fail, only for a queue whose breaker_failures is set.
--   closed    -> one row appended to backoff.queue_failures (no row is
--                updated), then the failures in (now - window, now] since
--                the last transition are counted through the index, at most
--                p_failures of them; at the threshold the breaker opens
--                (backoff.queue_breakers: opened_at = now, half open from
--                now + cooldown). Two expired log rows are deleted per
--                append, so the log holds about one window of failures.
--   open      -> nothing: the outage is already counted (attempts that
--                were running when it opened still fail).
--   half open -> reopens (opened_at = now): the probe failed.
-- Concurrent fails do not see each other's uncommitted rows, so the
-- breaker may open a few failures late (at most one per concurrent fail);
-- never early. Transitions are guarded on the state they saw, so two
-- concurrent transitions make one. A fail never waits for a row lock: it
-- takes the state row FOR UPDATE SKIP LOCKED before a transition, and a
-- row another transaction holds means that one is changing the state (a
-- half-open reopen that finds a probe-handing claim there logs the
-- failure, which that claim's successor turns into the reopen).
CREATE OR REPLACE FUNCTION backoff._breaker_failure(
    p_queue    text,
    p_failures integer,
    p_window   interval,
    p_cooldown interval,
    p_now      timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_state backoff.queue_breakers;
    v_from  timestamptz;
    v_count bigint;
    v_found boolean;
BEGIN
    SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
    v_found := FOUND;
    IF v_state.opened_at IS NOT NULL THEN
        IF p_now >= v_state.half_open_at THEN
            -- Half open: reopen, under the row's lock, if it is free and
            -- still the period this fail saw. A row another transaction
            -- holds is not waited for: a fail reopening it, a complete
            -- closing it, or a claim handing out probes. For the last
            -- one, the failure is logged instead, and the next half-open
            -- claim reopens the breaker from it (backoff._claim_controlled).
            PERFORM FROM backoff.queue_breakers AS b
            WHERE b.queue = p_queue AND b.opened_at = v_state.opened_at
            FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE backoff.queue_breakers AS b
                SET opened_at = p_now,
                    half_open_at = backoff._clamp_time(p_now + p_cooldown),
                    probes_left = NULL,
                    probe_ids = NULL,
                    counted_from = p_now
                WHERE b.queue = p_queue;
            ELSE
                INSERT INTO backoff.queue_failures (queue, failed_at) VALUES (p_queue, p_now);
            END IF;
        END IF;
        RETURN;
    END IF;

    INSERT INTO backoff.queue_failures (queue, failed_at) VALUES (p_queue, p_now);
    -- greatest ignores NULL: no state row yet counts the whole window.
    v_from := greatest(p_now - p_window, v_state.counted_from);
    SELECT count(*) INTO v_count
    FROM (SELECT FROM backoff.queue_failures AS f
          WHERE f.queue = p_queue AND f.failed_at > v_from AND f.failed_at <= p_now
          LIMIT p_failures) AS w;
    -- At the threshold, open it: one transition, made by the fail that
    -- gets the row (or, for a queue whose breaker never opened, the right
    -- to create it) without waiting; concurrent fails at the threshold
    -- skip it, so none of them queues behind the opener's commit.
    IF v_count >= p_failures THEN
        IF v_found THEN
            PERFORM FROM backoff.queue_breakers AS b
            WHERE b.queue = p_queue AND b.opened_at IS NULL
            FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE backoff.queue_breakers AS b
                SET opened_at = p_now,
                    half_open_at = backoff._clamp_time(p_now + p_cooldown),
                    probes_left = NULL,
                    probe_ids = NULL,
                    counted_from = p_now
                WHERE b.queue = p_queue;
            END IF;
        ELSIF pg_catalog.pg_try_advisory_xact_lock(
                  pg_catalog.hashtext('backoff.queue_breakers'), pg_catalog.hashtext(p_queue)) THEN
            -- Only fails create the row, each under this lock, so the
            -- INSERT never waits for another's uncommitted one; a row
            -- committed meanwhile is an open breaker (DO NOTHING).
            INSERT INTO backoff.queue_breakers (queue, opened_at, half_open_at, probes_left, counted_from)
            VALUES (p_queue, p_now, backoff._clamp_time(p_now + p_cooldown), NULL, p_now)
            ON CONFLICT (queue) DO NOTHING;
        END IF;
    END IF;
    -- Prune: rows that no longer count, oldest first, skipping rows another
    -- fail is deleting (never waits).
    DELETE FROM backoff.queue_failures AS f
    WHERE f.ctid = ANY (ARRAY(
        SELECT o.ctid
        FROM backoff.queue_failures AS o
        WHERE o.queue = p_queue AND o.failed_at <= v_from
        ORDER BY o.failed_at
        LIMIT 2
        FOR UPDATE SKIP LOCKED));
END
$$;

-- backoff.fail(job id, attempt, error, retry_in, retryable, now): settle a
-- failed running attempt with ONE guarded UPDATE whose new status, run_at,
-- reason and completed_at come from backoff._retry_decision, the same
-- decision reap uses. The error path reads the row only when the UPDATE
-- matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.fail(
    p_job_id    bigint,
    p_attempt   integer,
    p_error     text,
    p_retry_in  interval DEFAULT NULL,
    p_retryable boolean DEFAULT true,
    p_now       timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job   backoff.jobs;
    -- Capped at 8 KiB with a marker (docs/reliability.md).
    v_error text := backoff._error_text(p_error);
    v_failures integer;
    v_window   interval;
    v_cooldown interval;
BEGIN
    IF p_error IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": error must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retry_in < interval '0' THEN
        RAISE EXCEPTION 'cannot fail job "%": retry_in must not be negative, got "%"', coalesce(p_job_id::text, 'NULL'), p_retry_in
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retryable IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": retryable must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    UPDATE backoff.jobs AS j
    SET (status, run_at, dead_letter_reason, completed_at) = (
            -- The policy is looked up once (OFFSET 0 keeps it a column: the
            -- inlined decision would otherwise call _job_policy for every
            -- field it reads), and so is its capped delay for the counted
            -- attempt (one _clamped_power call at most).
            SELECT d.status, d.run_at, d.dead_letter_reason, d.completed_at
            FROM (SELECT backoff._job_policy(j.policy, j.queue) AS policy_row OFFSET 0) AS p
            CROSS JOIN LATERAL (
                SELECT backoff._policy_capped_us(p.policy_row, j.attempts - j.uncounted_attempts) AS capped_us OFFSET 0) AS c
            CROSS JOIN LATERAL backoff._retry_decision(
                p.policy_row, c.capped_us, j.id, j.attempts - j.uncounted_attempts, j.max_attempts, j.lease_expiries,
                j.created_at, j.run_at, p_retry_in, p_retryable, p_now) AS d),
        lease_until = NULL,
        locked_by = NULL,
        last_failed_at = p_now,
        last_error = v_error,
        errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now, v_error, j.locked_by, 'error')
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        -- Another queue's job: the error undoes the UPDATE.
        PERFORM backoff._check_queue(ARRAY[v_job.queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);
        -- The queue's circuit breaker counts every fail (docs/adr/0045):
        -- one primary-key probe of backoff.queues when it has none.
        SELECT q.breaker_failures, q.breaker_window, q.breaker_cooldown
        INTO v_failures, v_window, v_cooldown
        FROM backoff.queues AS q
        WHERE q.name = v_job.queue AND q.breaker_failures IS NOT NULL;
        IF FOUND THEN
            PERFORM backoff._breaker_failure(v_job.queue, v_failures, v_window, v_cooldown, p_now);
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('fail', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.fail(bigint, integer, text, interval, boolean, timestamptz) IS
'Report that running attempt p_attempt of job p_job_id failed with p_error. One guarded UPDATE decides: not p_retryable -> dead_lettered (reason non_retryable); the job''s lease_expiries >= the policy''s max_lease_expiries -> dead_lettered (lease_expiries); the counted attempt (attempts - uncounted_attempts: claims given back by snooze or before a replay do not count) >= max_attempts (the job''s, else its policy''s) -> dead_lettered (max_attempts); next run after created_at + the policy deadline -> dead_lettered (deadline); otherwise retrying at p_now + (p_retry_in clamped to the policy max, else the policy delay for the counted attempt seeded by the job id). Dead letters get completed_at = p_now. Every fail counts toward the queue''s circuit breaker, if it has one (backoff.queues.breaker_failures): it may open the breaker, and it reopens a half-open one. Lease and locked_by are cleared, last_failed_at = p_now, last_error = p_error (texts over 8 KiB are cut, ending with '' [truncated: N bytes]''), and {attempt (the token p_attempt), counted, at, error, worker, kind: error} is appended to errors (the 20 most recent are kept). reap takes the same decision. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, attempt, error or retryable, an attempt < 1, a negative retry_in, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on the job''s queue (nothing is changed).
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, attempts - uncounted_attempts AS counted, run_at - now() AS retry_in, last_error FROM backoff.fail(1, 1, ''smtp timeout'');';

-- backoff.reap(now, limit): move running jobs whose lease expired through
-- backoff._retry_decision, the same decision fail uses, as retryable
-- failures with message 'lease expired' and kind 'lease_expired'. Each
-- counts in the job's lease_expiries, which the policy's
-- max_lease_expiries bounds (docs/adr/0046); a lease expiry does not count
-- toward the queue's circuit breaker (docs/adr/0045). One
-- set-based UPDATE per batch (docs/adr/0041): each distinct (policy, queue)
-- of the batch is looked up once, its delay before jitter computed once
-- per distinct counted attempt (docs/adr/0052), and the decision is
-- inlined, so a row costs no PL/pgSQL call (only md5 for the jitter of a
-- retried job). The batch is locked with FOR UPDATE SKIP LOCKED, so any number of
-- reapers can run at once without waiting for one another or settling a job
-- twice. The outer UPDATE does not repeat the conditions: the rows are
-- locked by the batch, which rechecked them on their latest version, and a
-- repeated "lease_until < p_now" would let the planner walk the lease index
-- instead of probing the primary key.
CREATE OR REPLACE FUNCTION backoff.reap(
    p_now   timestamptz DEFAULT now(),
    p_limit integer DEFAULT 1000
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_count integer;
    -- A caller scoped by backoff.grant_queue reaps its 'work' queues only.
    v_scope text[] := backoff._queue_scope('work');
BEGIN
    p_now := backoff._now(p_now);
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'reap: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The batch is locked first (FOR UPDATE SKIP LOCKED returns each row as
    -- its latest version, which nobody can change until we commit), its
    -- distinct (policy, queue) pairs are resolved once each, and the
    -- decision, inlined, is taken per row from the locked values. The UPDATE
    -- then finds each row through the primary key (j.id = d.id; the batch is
    -- estimated small, so a nested loop of primary-key probes). It once also
    -- said "j.id = ANY (the batch's ids)": with the decision's join
    -- estimated at one row the planner put that array into the inner index
    -- scan, which sorted the whole array again for every row (quadratic: 5x
    -- the instructions per row at batches of 1,000; the plan test checks).
    WITH batch AS MATERIALIZED (
        SELECT r.id, r.queue, r.policy, r.attempts, r.uncounted_attempts, r.max_attempts, r.lease_expiries,
               r.created_at, r.run_at
        FROM backoff.jobs AS r
        -- Only running jobs have a lease (CHECK jobs_lease_while_running).
        -- Adding "status = 'running'" would make the planner expect one row
        -- and prefer a bitmap scan plus a sort of every expired lease to
        -- this ordered walk of jobs_lease_idx that stops at p_limit.
        WHERE r.lease_until < p_now
          AND (v_scope IS NULL OR r.queue LIKE ANY (v_scope))
        ORDER BY r.lease_until
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), batch_policy AS MATERIALIZED (
        SELECT k.queue, k.policy, backoff._job_policy(k.policy, k.queue) AS policy_row
        FROM (SELECT DISTINCT b.queue, b.policy FROM batch AS b) AS k
    ), batch_delay AS MATERIALIZED (
        -- The policy's capped delay before jitter depends on the policy and
        -- the counted attempt only: computed once per distinct pair here
        -- (docs/adr/0052), the job's jitter is added by the decision.
        SELECT k.queue, k.policy, k.counted, p.policy_row,
               backoff._policy_capped_us(p.policy_row, k.counted) AS capped_us
        FROM (SELECT DISTINCT b.queue, b.policy, b.attempts - b.uncounted_attempts AS counted FROM batch AS b) AS k
        JOIN batch_policy AS p ON p.queue = k.queue AND p.policy IS NOT DISTINCT FROM k.policy
    ), decided AS (
        SELECT b.id, d.status, d.run_at, d.dead_letter_reason, d.completed_at
        FROM batch AS b
        JOIN batch_delay AS p ON p.queue = b.queue AND p.policy IS NOT DISTINCT FROM b.policy
                             AND p.counted = b.attempts - b.uncounted_attempts
        CROSS JOIN LATERAL backoff._retry_decision(
            p.policy_row, p.capped_us, b.id, p.counted, b.max_attempts, b.lease_expiries + 1,
            b.created_at, b.run_at, NULL, true, p_now) AS d
    )
    UPDATE backoff.jobs AS j
    SET status = d.status,
        run_at = d.run_at,
        dead_letter_reason = d.dead_letter_reason,
        completed_at = d.completed_at,
        lease_expiries = j.lease_expiries + 1,
        lease_until = NULL,
        locked_by = NULL,
        last_failed_at = p_now,
        last_error = 'lease expired',
        errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now, 'lease expired', j.locked_by, 'lease_expired')
    FROM decided AS d
    WHERE j.id = d.id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.reap(timestamptz, integer) IS
'Settle up to p_limit running jobs whose lease expired (lease_until < p_now) as failed attempts, through the same decision as fail (retryable, no requested delay), with lease_expiries + 1: retrying at the policy''s next delay, or dead_lettered (lease_expiries when the count reaches the policy''s max_lease_expiries, else max_attempts or deadline). Lease expiries do not count toward the queue''s circuit breaker. last_error = ''lease expired'', and the history entry has kind lease_expired, the expired attempt (its token) and counted attempt, and the worker that held the lease. Returns how many jobs it moved. Safe to run from many places at once: each batch is locked with FOR UPDATE SKIP LOCKED. A caller scoped by backoff.grant_queue reaps only the queues it may work on.
Errors: 22023 for a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT backoff.reap(p_now => now() + interval ''1 minute'') AS reaped;';

-- backoff.heartbeat(job id, attempt, extend, now): extend the lease of a
-- running attempt. One guarded UPDATE; errors chosen only after it matched
-- nothing.
CREATE OR REPLACE FUNCTION backoff.heartbeat(
    p_job_id  bigint,
    p_attempt integer,
    p_extend  interval DEFAULT NULL,
    p_now     timestamptz DEFAULT now()
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_lease_until timestamptz;
    v_queue       text;
BEGIN
    IF p_extend <= interval '0' OR NOT backoff._valid_span(p_extend) THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": extend must be positive and at most 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), p_extend
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    UPDATE backoff.jobs AS j
    SET lease_until = backoff._clamp_time(p_now + coalesce(p_extend, (backoff._job_policy(j.policy, j.queue)).lease))
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.lease_until, j.queue INTO v_lease_until, v_queue;
    IF FOUND THEN
        -- Another queue's job: the error undoes the UPDATE.
        PERFORM backoff._check_queue(ARRAY[v_queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);
    ELSE
        PERFORM backoff._raise_fencing_error('heartbeat', p_job_id, p_attempt);
    END IF;
    RETURN v_lease_until;
END
$$;

COMMENT ON FUNCTION backoff.heartbeat(bigint, integer, interval, timestamptz) IS
'Extend the lease of running attempt p_attempt of job p_job_id to p_now + p_extend (the policy lease when NULL); returns the new lease_until. A lease that expired but was not reaped yet can still be extended: the attempt number, not the clock, says who holds the job.
Errors: BK002 the job is live but not running this attempt (reaped, re-claimed); BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id or attempt, an attempt < 1, an extend <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on the job''s queue (nothing is changed).
Example:
SELECT backoff.enqueue(''reports'');
SELECT id FROM backoff.claim(''reports'', ''worker-1'');
SELECT backoff.heartbeat(1, 1, ''1 minute'') - now() AS lease_left;';

-- backoff.snooze(job id, attempt, delay, now): put a running attempt back
-- to pending at p_now + p_delay without spending it: uncounted_attempts
-- goes up by one, so the counted attempt goes back by one while attempts,
-- the fencing token, stays; the next claim has a new token
-- (docs/adr/0020-tokens-that-never-repeat.md). A snooze repeated after its
-- reply was lost is refused (BK002 once the job is pending or re-claimed).
CREATE OR REPLACE FUNCTION backoff.snooze(
    p_job_id  bigint,
    p_attempt integer,
    p_delay   interval,
    p_now     timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_delay IS NULL OR p_delay < interval '0' OR NOT backoff._valid_span(p_delay) THEN
        RAISE EXCEPTION 'cannot snooze job "%": delay must be between 0 and 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), coalesce(p_delay::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    UPDATE backoff.jobs AS j
    SET status = 'pending',
        uncounted_attempts = j.uncounted_attempts + 1,
        run_at = backoff._clamp_time(p_now + p_delay),
        lease_until = NULL,
        locked_by = NULL
    WHERE j.id = p_job_id
      AND j.status = 'running'
      AND j.attempts = p_attempt
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        -- Another queue's job: the error undoes the UPDATE.
        PERFORM backoff._check_queue(ARRAY[v_job.queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);
    ELSE
        PERFORM backoff._raise_fencing_error('snooze', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.snooze(bigint, integer, interval, timestamptz) IS
'Put running attempt p_attempt of job p_job_id back to pending with run_at = p_now + p_delay (at most year 9999), without spending an attempt: uncounted_attempts + 1, so the counted attempt (attempts - uncounted_attempts, what max_attempts bounds) goes back by one. attempts, the fencing token, never goes down: the next claim gets a new token, and a repeated or stale snooze with this one is refused. Lease and locked_by are cleared; no error is recorded. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, attempt or delay, an attempt < 1, a negative delay, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on the job''s queue (nothing is changed).
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, attempts - uncounted_attempts AS counted, run_at - now() AS runs_in FROM backoff.snooze(1, 1, ''5 minutes'');';

-- backoff.cancel(job id, reason, now): terminal 'cancelled' for a job that
-- is not finished (pending, retrying or running). A running worker learns
-- it at its next complete, fail, heartbeat or snooze (BK003).
CREATE OR REPLACE FUNCTION backoff.cancel(
    p_job_id bigint,
    p_reason text DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot cancel job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    UPDATE backoff.jobs AS j
    SET status = 'cancelled',
        completed_at = p_now,
        lease_until = NULL,
        locked_by = NULL,
        last_error = coalesce(backoff._error_text(p_reason), j.last_error)
    WHERE j.id = p_job_id
      AND j.status IN ('pending', 'running', 'retrying')
    RETURNING j.* INTO v_job;
    IF FOUND THEN
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot cancel job "%": it is "%"', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.cancel(bigint, text, timestamptz) IS
'Cancel job p_job_id if it is pending, retrying or running: status cancelled (terminal), completed_at = p_now, lease and locked_by cleared, last_error = p_reason when given (capped at 8 KiB like fail''s error text). A worker still running it gets BK003 from complete, fail, heartbeat and snooze. replay brings it back; its next claim has a new token, so that worker gets BK002 then. Returns the job.
Errors: BK003 the job is already completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT status, last_error FROM backoff.cancel(1, ''customer deleted'');';

-- backoff.replay(job id, now): a dead-lettered or cancelled job back to
-- pending, due at p_now, with a fresh attempt budget: uncounted_attempts =
-- attempts, so the counted attempt is 0, while attempts, the fencing token,
-- keeps counting (docs/adr/0020-tokens-that-never-repeat.md): a worker
-- still running the cancelled attempt cannot settle the next one. Two
-- concurrent replays of one job: the second waits for the first's row lock,
-- then finds a pending job (BK003). The error history and last_error stay
-- as evidence.
CREATE OR REPLACE FUNCTION backoff.replay(
    p_job_id bigint,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot replay job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    BEGIN
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            uncounted_attempts = j.attempts,
            lease_expiries = 0,
            run_at = p_now,
            dead_letter_reason = NULL,
            completed_at = NULL,
            lease_until = NULL,
            locked_by = NULL
        WHERE j.id = p_job_id
          AND j.status IN ('dead_lettered', 'cancelled')
        RETURNING j.* INTO v_job;
    EXCEPTION WHEN unique_violation THEN
        SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
        RAISE EXCEPTION 'cannot replay job "%": an unfinished job of queue "%" holds its dedupe key "%"',
            p_job_id, v_job.queue, v_job.dedupe_key
            USING ERRCODE = 'BK003';
    END;
    IF v_job.id IS NOT NULL THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', v_job.queue);
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot replay job "%": it is "%", only dead_lettered or cancelled jobs can be replayed', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.replay(bigint, timestamptz) IS
'Bring a dead_lettered or cancelled job back: status pending, run_at = p_now, a fresh budget (uncounted_attempts = attempts, so the counted attempt attempts - uncounted_attempts is 0, and lease_expiries = 0), dead_letter_reason and completed_at cleared; errors and last_error are kept as history. attempts, the fencing token, is kept and the next claim gets attempts + 1, so a worker still running an attempt from before the cancel or dead letter is refused (BK002) on the replayed job. The job keeps its created_at, so a policy deadline still counts from it. Notifies channel backoff_jobs. Returns the job.
Errors: BK003 the job is pending, running, retrying or completed, or an unfinished job of its queue now holds its dedupe key; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.fail(1, 1, ''bad address'', p_retryable => false);
SELECT status, attempts, attempts - uncounted_attempts AS counted, jsonb_array_length(errors) AS history FROM backoff.replay(1);';

-- backoff.replay_dead_letters(queue, now): every dead-lettered job of a
-- queue back to pending, as backoff.replay does it, in one UPDATE. What it
-- cannot replay it leaves dead-lettered and reports, one row per job with
-- the reason, instead of failing the whole batch: today that is a dedupe
-- key held by an unfinished job of the queue (or by an older dead letter
-- replayed in the same call). Like replay, it gives a fresh budget
-- (uncounted_attempts = attempts) and keeps the fencing token counting
-- (docs/adr/0020): a worker still running a dead letter's reaped attempt
-- cannot settle the replayed job's next claim. Admin only.
CREATE OR REPLACE FUNCTION backoff.replay_dead_letters(
    p_queue text,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (job_id bigint, replayed boolean, reason text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    RETURN QUERY
    WITH locked AS MATERIALIZED (
        SELECT j.id, j.dedupe_key
        FROM backoff.jobs AS j
        WHERE j.queue = p_queue AND j.status = 'dead_lettered'
        ORDER BY j.id
        FOR UPDATE
    ), dead AS MATERIALIZED (
        SELECT l.id, l.dedupe_key,
               pg_catalog.row_number() OVER (PARTITION BY l.dedupe_key ORDER BY l.id) AS nth
        FROM locked AS l
    ), verdict AS MATERIALIZED (
        SELECT d.id,
               CASE
                   WHEN d.dedupe_key IS NULL THEN NULL
                   WHEN h.id IS NOT NULL THEN
                       pg_catalog.format('dedupe key %s is held by unfinished job %s', pg_catalog.quote_literal(d.dedupe_key), h.id)
                   WHEN d.nth > 1 THEN
                       pg_catalog.format('dedupe key %s is held by job %s, replayed in this call', pg_catalog.quote_literal(d.dedupe_key),
                                         (SELECT f.id FROM dead AS f WHERE f.dedupe_key = d.dedupe_key AND f.nth = 1))
               END AS reason
        FROM dead AS d
        LEFT JOIN LATERAL (
            SELECT u.id FROM backoff.jobs AS u
            WHERE d.dedupe_key IS NOT NULL AND u.queue = p_queue AND u.dedupe_key = d.dedupe_key
              AND u.status IN ('pending', 'running', 'retrying')
            LIMIT 1) AS h ON true
    ), done AS (
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            uncounted_attempts = j.attempts,
            lease_expiries = 0,
            run_at = p_now,
            dead_letter_reason = NULL,
            completed_at = NULL,
            lease_until = NULL,
            locked_by = NULL
        FROM verdict AS v
        WHERE j.id = v.id AND v.reason IS NULL
        RETURNING j.id
    )
    SELECT v.id, v.reason IS NULL, v.reason
    FROM verdict AS v
    ORDER BY v.id;

    IF FOUND THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
    END IF;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'cannot replay the dead letters of queue "%": a concurrent enqueue took a dedupe key; nothing was replayed, try again', p_queue
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.replay_dead_letters(text, timestamptz) IS
'Replay every dead-lettered job of p_queue in one statement, as backoff.replay would each (status pending, run_at = p_now, a fresh budget: uncounted_attempts = attempts, so the counted attempt is 0, and lease_expiries = 0, while attempts, the fencing token, keeps counting; dead_letter_reason and completed_at cleared, history kept), and return one row per dead letter, in id order: job_id, replayed, and for a job it left dead-lettered the reason. A job is left when its dedupe key is held by an unfinished job of the queue, or by an older dead letter with the same key that this call replays. Notifies channel backoff_jobs when it replayed anything. Admin only.
Errors: 22023 for a NULL or empty queue or a bad p_now (p_now NULL is the database clock); BK003 when a concurrent enqueue took a dedupe key between the check and the update (nothing is replayed; call again).
Example:
SELECT * FROM backoff.replay_dead_letters(''emails'');';

-- backoff.error_signature(error): an error text with what varies between
-- occurrences of one failure masked, so that dead letters group by cause:
-- UUIDs become <id>, hexadecimal runs of 8 or more characters <hex>, and
-- every run of digits N. The web UI's dead-letter groups and
-- backoff.bulk_jobs' p_error_signature filter both use it.
CREATE OR REPLACE FUNCTION backoff.error_signature(p_error text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.regexp_replace(
             pg_catalog.regexp_replace(
               pg_catalog.regexp_replace(pg_catalog.left(coalesce(p_error, ''), 500),
                 '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
               '\m(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,}\M', '<hex>', 'g'),
             '[0-9]+', 'N', 'g')
$$;

COMMENT ON FUNCTION backoff.error_signature(text) IS
'The signature of an error text: its first 500 characters with UUIDs replaced by <id>, hexadecimal runs of 8 or more characters (with a digit) by <hex> and every run of digits by N, so that occurrences of one failure compare equal. NULL gives ''''. Immutable.
Example:
SELECT backoff.error_signature(''order 1234 failed: upstream 503''); -- order N failed: upstream N';

-- backoff.bulk_jobs(action, filter..., now): replay or cancel every job
-- that matches a filter, in one call, for operators acting on a whole
-- listing (the web UI's bulk actions). The filter is the one of the client's
-- List (queue, statuses, effective policy, dead-letter reason, text in the
-- last error, creation time range) plus an error signature
-- (backoff.error_signature). Each job goes through backoff.replay or
-- backoff.cancel in its own subtransaction: one row per matching job, in id
-- order, says whether it was done and if not why, so one job that cannot be
-- acted on does not undo the others. Admin only.
CREATE OR REPLACE FUNCTION backoff.bulk_jobs(
    p_action             text,
    p_queue              text DEFAULT NULL,
    p_statuses           text[] DEFAULT NULL,
    p_policy             text DEFAULT NULL,
    p_dead_letter_reason text DEFAULT NULL,
    p_error_contains     text DEFAULT NULL,
    p_error_signature    text DEFAULT NULL,
    p_created_from       timestamptz DEFAULT NULL,
    p_created_to         timestamptz DEFAULT NULL,
    p_limit              integer DEFAULT 10000,
    p_now                timestamptz DEFAULT now()
)
RETURNS TABLE (job_id bigint, done boolean, reason text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_action IS NULL OR p_action NOT IN ('replay', 'cancel') THEN
        RAISE EXCEPTION 'bulk action must be replay or cancel, got "%"', coalesce(p_action, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'bulk limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    FOR v_id IN
        SELECT j.id
        FROM backoff.jobs AS j
        WHERE (p_queue IS NULL OR j.queue = p_queue)
          AND (p_statuses IS NULL OR j.status = ANY (p_statuses))
          AND (p_policy IS NULL OR backoff.job_policy(j.policy, j.queue) = p_policy)
          AND (p_dead_letter_reason IS NULL OR j.dead_letter_reason = p_dead_letter_reason)
          AND (p_error_contains IS NULL OR pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower(p_error_contains)) > 0)
          AND (p_error_signature IS NULL OR backoff.error_signature(j.last_error) = p_error_signature)
          AND (p_created_from IS NULL OR j.created_at >= p_created_from)
          AND (p_created_to IS NULL OR j.created_at < p_created_to)
        ORDER BY j.id
        LIMIT p_limit
    LOOP
        job_id := v_id;
        BEGIN
            IF p_action = 'replay' THEN
                PERFORM backoff.replay(p_job_id => v_id, p_now => p_now);
            ELSE
                PERFORM backoff.cancel(p_job_id => v_id, p_reason => 'bulk cancel', p_now => p_now);
            END IF;
            done := true;
            reason := NULL;
        EXCEPTION WHEN OTHERS THEN
            done := false;
            reason := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.bulk_jobs(text, text, text[], text, text, text, text, timestamptz, timestamptz, integer, timestamptz) IS
'Replay (p_action ''replay'') or cancel (''cancel'') every job matching the filter, at most p_limit (default 10000) in id order, in one call: each through backoff.replay or backoff.cancel in its own subtransaction. Returns one row per matching job: job_id, done, and for a job left alone the reason (the error the single call raised, e.g. a pending job cannot be replayed). NULL filter arguments do not filter; p_policy is the effective policy (backoff.job_policy); p_error_contains is case-insensitive text in last_error; p_error_signature compares backoff.error_signature(last_error); created_at in [p_created_from, p_created_to). Admin only.
Errors: 22023 for an action other than replay or cancel, a p_limit below 1 or a bad p_now.
Example:
SELECT * FROM backoff.bulk_jobs(''replay'', p_queue => ''emails'', p_statuses => ''{dead_lettered}'');';

-- backoff.prune(older than, limit, now): delete up to p_limit finished jobs
-- (completed, dead_lettered, cancelled) whose completed_at is older than
-- p_now - p_older_than. No index serves it, on purpose: an index on
-- completed_at would be paid by every settle, and prune runs rarely. The
-- scan stops as soon as it has p_limit rows, and old rows sit early in the
-- heap (docs/adr/0009-retention-and-prune.md).
-- It also removes the queue controls' runtime state that nothing reads any
-- more (docs/adr/0054), up to p_limit rows of each table per call: the
-- failure log, breaker row and token slots of a queue whose backoff.queues
-- row is gone or whose breaker / rate was removed, the slots a smaller
-- burst no longer uses, and log rows older than a configured breaker's
-- window (fail deletes only two per append, so a queue that stops failing
-- keeps its last window). While a breaker is open, the log rows from
-- half_open_at on are kept: the next half-open claim reopens from them.
-- These rows are not in the result (it counts jobs, so that "call it until
-- it returns less than p_limit" keeps its meaning); every delete skips
-- locked rows, so prune never waits for a claim or a fail.
CREATE OR REPLACE FUNCTION backoff.prune(
    p_older_than interval,
    p_limit      integer DEFAULT 10000,
    p_now        timestamptz DEFAULT now()
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' OR NOT backoff._valid_span(p_older_than) THEN
        RAISE EXCEPTION 'prune: older_than must be between 0 and 876600 hours, got "%"', coalesce(p_older_than::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'prune: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    DELETE FROM backoff.jobs AS j
    WHERE j.id = ANY (ARRAY(
        SELECT f.id
        FROM backoff.jobs AS f
        WHERE f.status IN ('completed', 'dead_lettered', 'cancelled')
          AND f.completed_at < p_now - p_older_than
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED));
    GET DIAGNOSTICS v_count = ROW_COUNT;

    -- The failure log: a queue without a breaker (or without a row), and,
    -- with one, rows older than its window except those an open breaker's
    -- next half-open claim reopens from (failed_at >= half_open_at).
    DELETE FROM backoff.queue_failures AS f
    WHERE f.ctid = ANY (ARRAY(
        SELECT o.ctid
        FROM backoff.queue_failures AS o
        LEFT JOIN backoff.queues AS q ON q.name = o.queue
        LEFT JOIN backoff.queue_breakers AS b ON b.queue = o.queue
        WHERE q.breaker_failures IS NULL
           OR (o.failed_at <= p_now - q.breaker_window
               AND (b.opened_at IS NULL OR o.failed_at < b.half_open_at))
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED));
    -- The breaker row of a queue without a breaker (no row = closed).
    DELETE FROM backoff.queue_breakers AS b
    WHERE b.queue = ANY (ARRAY(
        SELECT s.queue
        FROM backoff.queue_breakers AS s
        WHERE NOT EXISTS (SELECT FROM backoff.queues AS q
                          WHERE q.name = s.queue AND q.breaker_failures IS NOT NULL)
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED));
    -- Token slots of a queue without a rate, and the slots numbered
    -- least(16, burst) or more, which claim ignores (docs/adr/0045).
    DELETE FROM backoff.queue_tokens AS t
    WHERE (t.queue, t.slot) IN (
        SELECT s.queue, s.slot
        FROM backoff.queue_tokens AS s
        LEFT JOIN backoff.queues AS q ON q.name = s.queue
        WHERE q.rate IS NULL
           OR s.slot >= least(16, backoff._queue_burst(q.rate, q.burst))
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED);
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.prune(interval, integer, timestamptz) IS
'Delete up to p_limit finished jobs (completed, dead_lettered, cancelled) whose completed_at is before p_now - p_older_than; returns how many. Dead letters are evidence: choose p_older_than long enough to read them. Call it repeatedly until it returns less than p_limit. Safe to run concurrently (FOR UPDATE SKIP LOCKED).
It also deletes, up to p_limit rows of each table per call and not counted in the result, the queue controls'' state that nothing reads any more: rows of backoff.queue_failures, backoff.queue_breakers and backoff.queue_tokens of a queue that has no backoff.queues row or no breaker (failures, breakers) or no rate (tokens); token slots numbered least(16, burst) or more; and failure-log rows at or before p_now - breaker_window of a queue with a breaker, except, while its breaker is open, those at or after half_open_at.
Errors: 22023 for a NULL or negative p_older_than, a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1);
SELECT backoff.prune(''7 days'', p_now => now() + interval ''8 days'') AS deleted;';

-- backoff.stats(window, now): one row per queue for the CLI and dashboards:
-- jobs per status, how many are due and how long the oldest due job has
-- waited, and what happened in the window (p_now - p_window, p_now]:
-- retries scheduled and jobs dead-lettered. A failure is read from the error
-- history, so only the 20 most recent per job count. One scan of the table:
-- fine for an operator's command, not for a tight loop.
CREATE OR REPLACE FUNCTION backoff.stats(
    p_window interval DEFAULT '1 hour',
    p_now    timestamptz DEFAULT now()
)
RETURNS TABLE (
    queue          text,
    pending        bigint,
    running        bigint,
    retrying       bigint,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    due            bigint,
    oldest_due_age interval,
    retries        bigint,
    dead_letters   bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window < interval '0' OR NOT backoff._valid_span(p_window) THEN
        RAISE EXCEPTION 'stats: window must be between 0 and 876600 hours, got "%"', coalesce(p_window::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    RETURN QUERY
    WITH counts AS (
        SELECT j.queue,
               count(*) FILTER (WHERE j.status = 'pending') AS pending,
               count(*) FILTER (WHERE j.status = 'running') AS running,
               count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
               count(*) FILTER (WHERE j.status = 'completed') AS completed,
               count(*) FILTER (WHERE j.status = 'dead_lettered') AS dead_lettered,
               count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now) AS due,
               p_now - min(j.run_at) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now)
                   AS oldest_due_age,
               count(*) FILTER (WHERE j.status = 'dead_lettered'
                                  AND j.completed_at > p_now - p_window AND j.completed_at <= p_now)
                   AS dead_letters
        FROM backoff.jobs AS j
        GROUP BY j.queue
    ),
    failures AS (
        -- Failures in the window that were followed by a retry: every
        -- history entry in the window but the one that dead-lettered its job.
        SELECT j.queue, count(*) AS retries
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL jsonb_array_elements(j.errors) WITH ORDINALITY AS e(entry, n)
        WHERE j.last_failed_at > p_now - p_window
          AND (e.entry ->> 'at')::timestamptz > p_now - p_window
          AND (e.entry ->> 'at')::timestamptz <= p_now
          AND NOT (j.status = 'dead_lettered' AND e.n = jsonb_array_length(j.errors))
        GROUP BY j.queue
    )
    SELECT c.queue, c.pending, c.running, c.retrying, c.completed, c.dead_lettered, c.cancelled,
           c.due, c.oldest_due_age, coalesce(f.retries, 0), c.dead_letters
    FROM counts AS c
    LEFT JOIN failures AS f ON f.queue = c.queue
    ORDER BY c.queue;
END
$$;

COMMENT ON FUNCTION backoff.stats(interval, timestamptz) IS
'One row per queue that has jobs: counts per status (pending, running, retrying, completed, dead_lettered, cancelled); due = pending or retrying with run_at <= p_now; oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and for the window (p_now - p_window, p_now]: retries = failed attempts (handler errors and expired leases) followed by a retry, read from the error history; dead_letters = jobs dead-lettered. Scans the whole table: for operators and dashboards, not for tight loops.
Errors: 22023 for a NULL or negative window, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT queue, pending, running, due, retries, dead_letters FROM backoff.stats(''15 minutes'');';

-- backoff.queue_state(queue, now): where a queue's controls stand at p_now
-- (docs/adr/0045): the circuit breaker's state, when it opened, the
-- failures counted in its window, the probes a half-open breaker still
-- hands out, the rate limit and the tokens in its bucket, and when a claim
-- can return jobs again. A pure read: an open breaker past its cooldown
-- reads as half_open, and the bucket's lazy refill is computed, not
-- written. One row, also for a queue without a backoff.queues row.
CREATE OR REPLACE FUNCTION backoff.queue_state(
    p_queue text,
    p_now   timestamptz DEFAULT NULL
)
RETURNS TABLE (
    queue         text,
    state         text,
    opened_at     timestamptz,
    failures      bigint,
    probes_left   integer,
    rate          double precision,
    burst         integer,
    tokens        double precision,
    next_claim_at timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_q        backoff.queues;
    v_state    backoff.queue_breakers;
    v_tokens   double precision;
    v_caps     double precision;
    v_nslots   integer;
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_now := backoff._now(p_now);
    PERFORM backoff._check_queue(ARRAY[p_queue], 'work') WHERE EXISTS (SELECT FROM backoff.queue_grants);

    SELECT * INTO v_q FROM backoff.queues AS q WHERE q.name = p_queue;
    queue := p_queue;
    state := 'closed';
    failures := 0;

    IF v_q.breaker_failures IS NOT NULL THEN
        SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        IF v_state.opened_at IS NOT NULL THEN
            opened_at := v_state.opened_at;
            IF p_now < v_state.half_open_at THEN
                state := 'open';
                next_claim_at := v_state.half_open_at;
            ELSE
                state := 'half_open';
                probes_left := coalesce(v_state.probes_left, v_q.breaker_probes);
            END IF;
        END IF;
        -- What fail counts toward the threshold: the window, since the
        -- breaker last changed state.
        SELECT count(*) INTO failures
        FROM backoff.queue_failures AS f
        WHERE f.queue = p_queue
          AND f.failed_at > greatest(p_now - v_q.breaker_window, v_state.counted_from)
          AND f.failed_at <= p_now;
    END IF;

    IF v_q.rate IS NOT NULL THEN
        rate := v_q.rate;
        burst := backoff._queue_burst(v_q.rate, v_q.burst);
        v_nslots := least(16, burst);
        -- The bucket's slots (backoff._claim_controlled), each refilled at
        -- its share of the rate up to its share of the burst; a slot not
        -- created yet is full.
        SELECT pg_catalog.sum(s.cap),
               pg_catalog.sum(least(s.cap, t.tokens + v_q.rate * s.cap / burst
                   * greatest(0, extract(epoch FROM p_now - t.refilled_at)::double precision)))
        INTO v_caps, v_tokens
        FROM backoff.queue_tokens AS t
        CROSS JOIN LATERAL (SELECT (burst / v_nslots + (t.slot < burst % v_nslots)::integer)::double precision AS cap) AS s
        WHERE t.queue = p_queue AND t.slot < v_nslots;
        tokens := coalesce(v_tokens, 0) + (burst - coalesce(v_caps, 0));
        -- (1e-9: as claim, which takes the tokens of all the free slots
        -- it needs, counts a whole token.)
        IF tokens + 1e-9 < 1 AND state <> 'half_open' THEN
            -- The next whole token: until then no slot is full (each holds
            -- at least one), so the slots together refill at rate. The wait
            -- is bounded so that the sum stays a time.
            next_claim_at := greatest(next_claim_at, backoff._clamp_time(p_now
                + least((1 - tokens) / v_q.rate, 3155760000::double precision) * interval '1 second'));
        END IF;
    END IF;

    IF v_q.paused THEN
        next_claim_at := NULL;  -- a pause has no end time
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.queue_state(text, timestamptz) IS
'The controls of p_queue at p_now (backoff.queues: rate, burst, breaker_failures, breaker_window, breaker_cooldown, breaker_probes), one row, also for a queue without a row (all off): queue; state closed, open or half_open (closed without a breaker; an open breaker past its cooldown reads half_open, nothing is written); opened_at (NULL when closed); failures, the fails counted toward breaker_failures in (p_now - breaker_window, p_now] since the breaker last changed state (0 without a breaker); probes_left (half open: jobs claim still hands out before a result closes or reopens the breaker; else NULL); rate; burst (the bucket size: burst, else greatest(1, ceil(rate)), at most 2147483647); tokens available at p_now (NULL without a rate); next_claim_at: NULL when controls let a claim return jobs now, else when the cooldown ends or the next whole token arrives, whichever is later; NULL too for a paused queue (no end time) and for a half-open breaker whose probes are all out (it waits for a result). Lease expiries do not count as failures.
Errors: 22023 for a queue that is not 1 to 128 bytes without control characters, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on p_queue.
Example:
UPDATE backoff.queues SET rate = 5, breaker_failures = 3, breaker_window = ''30 seconds'', breaker_cooldown = ''1 minute'' WHERE name = ''emails'';
SELECT state, failures, tokens, next_claim_at FROM backoff.queue_state(''emails'');';

-- backoff.overview(now, exact_limit): one row per queue for the web UI's
-- overview, which refreshes every few seconds, without a scan of the
-- finished rows (docs/adr/0048-overview-without-full-scans.md):
-- * pending, retrying, due and the oldest due from an index-only scan of
--   jobs_claimable_idx (its live rows only; status is INCLUDEd);
-- * running from jobs_lease_idx (lease_until is set exactly while running);
-- * completed, dead_lettered and cancelled from jobs_finished_idx, counted
--   exactly while a queue has at most p_exact_limit finished rows; above,
--   the planner's estimate for (queue, status) (statistics
--   jobs_queue_status, as of the last ANALYZE), and finished_exact is false;
-- * the queue list: backoff.queues, and the queues of live, running and
--   finished rows (a loose index scan over jobs_finished_idx);
-- * the controls of a queue that has a rate or a breaker: backoff.queue_state.
-- VOLATILE only because it runs EXPLAIN for the estimates; it writes
-- nothing and takes no lock beyond a plain read. No parallel workers: a
-- refresh uses one core, whatever the workers need. Admin only.
CREATE OR REPLACE FUNCTION backoff.overview(
    p_now         timestamptz DEFAULT NULL,
    p_exact_limit integer DEFAULT 10000
)
RETURNS TABLE (
    queue          text,
    policy         text,
    paused         boolean,
    configured     boolean,
    pending        bigint,
    running        bigint,
    retrying       bigint,
    due            bigint,
    oldest_due_age interval,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    finished_exact boolean,
    breaker        text,
    rate           double precision,
    tokens         double precision,
    next_claim_at  timestamptz
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $$
DECLARE
    v_row   record;
    v_total bigint;
    v_plan  json;
    v_state text;
BEGIN
    IF p_exact_limit IS NULL OR p_exact_limit < 0 THEN
        RAISE EXCEPTION 'overview: exact limit must be 0 or more, got "%"', coalesce(p_exact_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    FOR v_row IN
        WITH RECURSIVE finished_queues (name) AS (
            (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT j.queue FROM backoff.jobs AS j
                    WHERE j.completed_at IS NOT NULL AND j.queue > f.name ORDER BY j.queue LIMIT 1)
            FROM finished_queues AS f
            WHERE f.name IS NOT NULL
        ),
        waiting AS (
            SELECT j.queue AS name,
                   count(*) FILTER (WHERE j.status = 'pending') AS pending,
                   count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
                   count(*) FILTER (WHERE j.run_at <= p_now) AS due,
                   min(j.run_at) AS first_run_at
            FROM backoff.jobs AS j
            WHERE j.status IN ('pending', 'retrying')
            GROUP BY j.queue
        ),
        leased AS (
            SELECT j.queue AS name, count(*) AS running
            FROM backoff.jobs AS j
            WHERE j.lease_until IS NOT NULL
            GROUP BY j.queue
        ),
        names AS (
            SELECT q.name FROM backoff.queues AS q
            UNION SELECT w.name FROM waiting AS w
            UNION SELECT l.name FROM leased AS l
            UNION SELECT f.name FROM finished_queues AS f WHERE f.name IS NOT NULL
        )
        SELECT n.name,
               coalesce(q.policy, backoff.job_policy(NULL, n.name)) AS policy,
               coalesce(q.paused, false) AS paused,
               (q.rate IS NOT NULL OR q.breaker_failures IS NOT NULL) AS controlled,
               q.name IS NOT NULL AS configured,
               coalesce(w.pending, 0) AS pending,
               coalesce(l.running, 0) AS running,
               coalesce(w.retrying, 0) AS retrying,
               coalesce(w.due, 0) AS due,
               CASE WHEN w.first_run_at <= p_now THEN p_now - w.first_run_at END AS oldest_due_age
        FROM names AS n
        LEFT JOIN backoff.queues AS q ON q.name = n.name
        LEFT JOIN waiting AS w ON w.name = n.name
        LEFT JOIN leased AS l ON l.name = n.name
        ORDER BY n.name
    LOOP
        queue := v_row.name;
        policy := v_row.policy;
        paused := v_row.paused;
        configured := v_row.configured;
        pending := v_row.pending;
        running := v_row.running;
        retrying := v_row.retrying;
        due := v_row.due;
        oldest_due_age := v_row.oldest_due_age;
        -- At most p_exact_limit + 1 entries of the queue's finished rows.
        SELECT count(*) FILTER (WHERE f.status = 'completed'),
               count(*) FILTER (WHERE f.status = 'dead_lettered'),
               count(*) FILTER (WHERE f.status = 'cancelled'),
               count(*)
        INTO completed, dead_lettered, cancelled, v_total
        FROM (SELECT j.status FROM backoff.jobs AS j
              WHERE j.queue = v_row.name AND j.completed_at IS NOT NULL
              LIMIT p_exact_limit + 1) AS f;
        finished_exact := v_total <= p_exact_limit;
        -- The queue's controls (issue 19), for a queue that has any.
        breaker := 'closed';
        rate := NULL;
        tokens := NULL;
        next_claim_at := NULL;
        IF v_row.controlled THEN
            SELECT s.state, s.rate, s.tokens, s.next_claim_at
            INTO breaker, rate, tokens, next_claim_at
            FROM backoff.queue_state(v_row.name, p_now) AS s;
        END IF;
        IF NOT finished_exact THEN
            -- The planner's row estimate: most common (queue, status) pairs
            -- from statistics jobs_queue_status, else per-column statistics.
            FOREACH v_state IN ARRAY ARRAY['completed', 'dead_lettered', 'cancelled'] LOOP
                EXECUTE pg_catalog.format(
                    'EXPLAIN (FORMAT JSON) SELECT 1 FROM backoff.jobs WHERE queue = %L AND status = %L',
                    v_row.name, v_state) INTO v_plan;
                CASE v_state
                    WHEN 'completed' THEN completed := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                    WHEN 'dead_lettered' THEN dead_lettered := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                    ELSE cancelled := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                END CASE;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.overview(timestamptz, integer) IS
'One row per queue (configured in backoff.queues, or holding jobs), by name, for a display that refreshes often (the web UI''s overview): policy (backoff.job_policy), paused, configured; exact counts of the live statuses pending, running and retrying; due = pending or retrying with run_at <= p_now and oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and completed, dead_lettered, cancelled: exact when the queue has at most p_exact_limit (default 10000) finished jobs (finished_exact true), else the planner''s estimate from the table statistics as of the last ANALYZE (finished_exact false; show them as approximate); for a queue with a rate or a circuit breaker, breaker, rate, tokens and next_claim_at as backoff.queue_state reads them (else breaker ''closed'' and NULLs). Reads indexes, not the whole table: its cost grows with the live jobs and the number of queues, not with the finished ones. backoff.stats keeps its exact whole-table counts for the CLI. Admin only.
Errors: 22023 for a NULL or negative p_exact_limit or a bad p_now.
Example:
SELECT queue, pending, running, retrying, due, completed, finished_exact FROM backoff.overview();';

-- backoff.activity(since, bucket, now): what happened per queue and per
-- bucket of time in [p_since, p_now]: jobs completed, dead-lettered and
-- cancelled (by completed_at, read from jobs_finished_idx one queue at a
-- time) and failed attempts (the error history of the jobs whose
-- last_failed_at is in the range, found by jobs_failed_idx). Buckets are
-- aligned to multiples of p_bucket since 2000-01-01 00:00 UTC, not to
-- p_now, so a bucket that has ended reads the same on every call: a display
-- that refreshes (the web UI's chart) keeps the ended ones and asks only
-- for the rest (docs/adr/0048-overview-without-full-scans.md). Its cost
-- grows with the events in the range, not with the table. Admin only.
CREATE OR REPLACE FUNCTION backoff.activity(
    p_since  timestamptz,
    p_bucket interval DEFAULT '1 minute',
    p_now    timestamptz DEFAULT NULL
)
RETURNS TABLE (
    queue         text,
    bucket        timestamptz,
    completed     bigint,
    failed        bigint,
    dead_lettered bigint,
    cancelled     bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $$
BEGIN
    IF p_bucket IS NULL OR p_bucket < interval '1 second' OR NOT backoff._valid_span(p_bucket) THEN
        RAISE EXCEPTION 'activity: bucket must be between 1 second and 876600 hours, got "%"', coalesce(p_bucket::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    IF p_since IS NULL OR NOT pg_catalog.isfinite(p_since) THEN
        RAISE EXCEPTION 'activity: since must be a finite time, got "%"', coalesce(p_since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_since > p_now THEN
        RETURN;
    END IF;
    IF extract(epoch FROM p_now - p_since) / extract(epoch FROM p_bucket) > 100000 THEN
        RAISE EXCEPTION 'activity: at most 100000 buckets, got % buckets of "%" since "%"',
            pg_catalog.ceil(extract(epoch FROM p_now - p_since) / extract(epoch FROM p_bucket)), p_bucket, p_since
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH RECURSIVE finished_queues (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j
                WHERE j.completed_at IS NOT NULL AND j.queue > f.name ORDER BY j.queue LIMIT 1)
        FROM finished_queues AS f
        WHERE f.name IS NOT NULL
    ),
    finished AS (
        SELECT f.name,
               pg_catalog.date_bin(p_bucket, e.completed_at, '2000-01-01 00:00:00+00'::timestamptz) AS b,
               count(*) FILTER (WHERE e.status = 'completed') AS c,
               count(*) FILTER (WHERE e.status = 'dead_lettered') AS d,
               count(*) FILTER (WHERE e.status = 'cancelled') AS x
        FROM finished_queues AS f
        CROSS JOIN LATERAL (
            SELECT j.completed_at, j.status FROM backoff.jobs AS j
            WHERE j.queue = f.name AND j.completed_at >= p_since AND j.completed_at <= p_now
            OFFSET 0 -- one index-only range per queue, never a join over the whole table
        ) AS e
        WHERE f.name IS NOT NULL
        GROUP BY 1, 2
    ),
    failures AS (
        SELECT j.queue AS name,
               pg_catalog.date_bin(p_bucket, (h.entry ->> 'at')::timestamptz, '2000-01-01 00:00:00+00'::timestamptz) AS b,
               count(*) AS n
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(j.errors) AS h(entry)
        WHERE j.last_failed_at >= p_since
          AND (h.entry ->> 'at')::timestamptz >= p_since
          AND (h.entry ->> 'at')::timestamptz <= p_now
        GROUP BY 1, 2
    )
    SELECT coalesce(fi.name, fa.name), coalesce(fi.b, fa.b), coalesce(fi.c, 0), coalesce(fa.n, 0),
           coalesce(fi.d, 0), coalesce(fi.x, 0)
    FROM finished AS fi
    FULL JOIN failures AS fa ON fa.name = fi.name AND fa.b = fi.b
    ORDER BY 1, 2;
END
$$;

COMMENT ON FUNCTION backoff.activity(timestamptz, interval, timestamptz) IS
'Per queue and per bucket of p_bucket (default 1 minute) in [p_since, p_now] (both included): completed, dead_lettered and cancelled = jobs that reached that status then (completed_at), failed = failed attempts then (handler errors and expired leases, from the error history, which keeps the 20 most recent per job). Buckets are aligned to multiples of p_bucket since 2000-01-01 00:00 UTC (bucket is the start), so an ended bucket reads the same on later calls (the first and last bucket only count what lies in the range). Buckets where nothing happened are absent. Reads indexes: its cost grows with the events in the range, not with the table. Admin only.
Errors: 22023 for a bucket below 1 second or above 876600 hours, a p_since that is NULL or infinite (one after p_now gives no rows), more than 100000 buckets, or a bad p_now.
Example:
SELECT * FROM backoff.activity(now() - interval ''1 hour'');';

-- backoff.pause_queue(queue): stop claims from a queue (claim skips a
-- paused queue; acquire, settling and heartbeats go on, so running jobs
-- finish). A queue without a row in backoff.queues gets one, with the
-- policy backoff._job_policy_name gives it today (so pausing changes no job's
-- policy). Returns true if the queue was running, false if it was already
-- paused. Admin only.
CREATE OR REPLACE FUNCTION backoff.pause_queue(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_was_paused boolean;
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT q.paused INTO v_was_paused FROM backoff.queues AS q WHERE q.name = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO backoff.queues (name, policy, paused, updated_at)
        VALUES (p_queue, backoff._job_policy_name(NULL, p_queue), true, pg_catalog.now())
        ON CONFLICT (name) DO UPDATE SET paused = true, updated_at = pg_catalog.now();
        RETURN true;
    END IF;
    IF v_was_paused THEN
        RETURN false;
    END IF;
    UPDATE backoff.queues AS q SET paused = true, updated_at = pg_catalog.now() WHERE q.name = p_queue;
    RETURN true;
END
$$;

COMMENT ON FUNCTION backoff.pause_queue(text) IS
'Pause p_queue: backoff.claim returns no job of it until backoff.resume_queue. Jobs already running go on (they can still complete, fail, heartbeat and snooze), enqueue still adds jobs, and backoff.acquire of a job by id still works. A queue without a row in backoff.queues gets one with the policy it has now (backoff.job_policy), so pausing changes no job''s policy. Returns true if the queue was running, false if it was already paused. Admin only.
Errors: 22023 for a NULL or empty queue.
Example:
SELECT backoff.pause_queue(''emails'');
SELECT name, policy, paused FROM backoff.queues;';

-- backoff.resume_queue(queue): undo backoff.pause_queue; claims of the queue
-- start again. Returns true if the queue was paused, false if it was not
-- (a queue without a row is not paused). Admin only.
CREATE OR REPLACE FUNCTION backoff.resume_queue(p_queue text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE backoff.queues AS q SET paused = false, updated_at = pg_catalog.now()
    WHERE q.name = p_queue AND q.paused;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.resume_queue(text) IS
'Resume p_queue after backoff.pause_queue: backoff.claim returns its due jobs again. Returns true if the queue was paused, false if it was not (a queue without a row in backoff.queues is not paused). Admin only.
Errors: 22023 for a NULL or empty queue.
Example:
SELECT backoff.resume_queue(''emails'');';

-- backoff.grant_queue(role, queue, privilege): allow p_role to act on
-- p_queue with p_privilege ('produce': enqueue; 'work': claim, acquire,
-- complete, complete_many, fail, heartbeat, snooze, reap). p_queue is a
-- queue name or a prefix ending in '*' ('mail.*'; '*' alone is every
-- queue). A role with at least one grant (its own or one of a role it is a
-- member of) may act only on the queues granted to it; a role without
-- grants keeps acting on every queue
-- (docs/adr/0038-queue-scoped-privileges.md). The grant is stored with its
-- LIKE pattern, so that the check is one LIKE ANY per call.
CREATE OR REPLACE FUNCTION backoff.grant_queue(
    p_role      text,
    p_queue     text,
    p_privilege text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role    oid;
    v_pattern text;
BEGIN
    SELECT r.oid INTO v_role FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'grant_queue: unknown role "%"', coalesce(p_role, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_privilege IS NULL OR p_privilege NOT IN ('produce', 'work') THEN
        RAISE EXCEPTION 'grant_queue: privilege must be "produce" or "work", got "%"', coalesce(p_privilege, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_queue := backoff._check_name('queue', p_queue);
    -- The prefix of 'mail.*' is 'mail.', matched literally.
    v_pattern := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                     CASE WHEN pg_catalog.right(p_queue, 1) = '*' THEN pg_catalog.left(p_queue, -1) ELSE p_queue END,
                     '\', '\\'), '%', '\%'), '_', '\_')
                 || CASE WHEN pg_catalog.right(p_queue, 1) = '*' THEN '%' ELSE '' END;
    INSERT INTO backoff.queue_grants (role, queue, privilege, pattern)
    VALUES (v_role, p_queue, p_privilege, v_pattern)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.grant_queue(text, text, text) IS
'Allow role p_role (and its members) to act on queue p_queue with p_privilege: ''produce'' (enqueue) or ''work'' (claim, acquire, complete, complete_many, fail, heartbeat, snooze; reap settles only the granted queues'' expired leases). p_queue is a queue name or a prefix ending in * (''mail.*''; ''*'' alone is every queue). A role that has at least one grant, directly or through a role it belongs to, may act only on its granted queues: anything else is refused with 42501 naming the queue, and it reads only the jobs of its ''work'' queues from backoff.jobs. Roles without grants keep acting on every queue. The scope follows the login (session_user): SET ROLE cannot widen it; a connection whose login has no grants takes the scope of the role it SET ROLEs to. Superusers are never scoped. Returns true when the grant is new, false when it existed. Admin only.
Errors: 22023 for an unknown role, a privilege other than produce or work, a queue that is not 1 to 128 bytes without control characters.
Example:
SELECT backoff.grant_queue(''backoff_worker'', ''mail.*'', ''work'');
SELECT role::regrole, queue, privilege FROM backoff.queue_grants ORDER BY 1, 2, 3;';

-- backoff.revoke_queue(role, queue, privilege): remove one grant of
-- backoff.grant_queue, exactly as it was written (a prefix grant is revoked
-- by the same 'mail.*', not queue by queue). Revoking a role's last grant
-- makes it unscoped again, i.e. free to act on every queue
-- (docs/adr/0038-queue-scoped-privileges.md).
CREATE OR REPLACE FUNCTION backoff.revoke_queue(
    p_role      text,
    p_queue     text,
    p_privilege text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role oid;
BEGIN
    SELECT r.oid INTO v_role FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'revoke_queue: unknown role "%"', coalesce(p_role, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_privilege IS NULL OR p_privilege NOT IN ('produce', 'work') THEN
        RAISE EXCEPTION 'revoke_queue: privilege must be "produce" or "work", got "%"', coalesce(p_privilege, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM backoff.queue_grants AS g
    WHERE g.role = v_role AND g.queue = p_queue AND g.privilege = p_privilege;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.revoke_queue(text, text, text) IS
'Remove the grant (p_role, p_queue, p_privilege) written by backoff.grant_queue, spelled as it was granted (a prefix grant ''mail.*'' is revoked as ''mail.*''). Returns true when a grant was removed, false when there was none. Revoking a role''s last grant leaves it unscoped: it may then act on every queue again, as a role that was never granted one. Admin only.
Errors: 22023 for an unknown role, a privilege other than produce or work.
Example:
SELECT backoff.grant_queue(''backoff_worker'', ''mail.*'', ''work'');
SELECT backoff.revoke_queue(''backoff_worker'', ''mail.*'', ''work'');';

-- Privileges of the functions installed with this file (docs/adr/0017,
-- docs/adr/0038): owner backoff_owner, nothing for PUBLIC, EXECUTE granted
-- by name so that every overload is covered. It runs last in install.sql,
-- so a snapshot carries the grants that go with its functions.
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
               OR (v_role = 'backoff_producer' AND v_fn.name IN ('enqueue', 'queue_state'))
               OR (v_role = 'backoff_worker' AND v_fn.name IN (
                       'claim', 'acquire', 'complete', 'complete_many', 'fail', 'heartbeat', 'snooze', 'reap',
                       'retry_delay', 'compute_delay', 'schedule', 'calculate_step_next_retry_time', 'job_policy',
                       'wait_for_jobs', 'stop_waiting', 'error_signature', 'queue_state',
                       -- private, for the row-level security policy of backoff.jobs
                       '_visible_queues'))
               OR (v_role = 'backoff_admin' AND v_fn.name NOT LIKE '\_%') THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn.sig, v_role);
            END IF;
        END LOOP;
    END LOOP;
END
$$;



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

-- ===== migration 5: 005_hardening.sql =====

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

-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
-- backoff.schema_version(): the migration version installed in this
-- database, so clients can refuse to run against an older schema.
CREATE OR REPLACE FUNCTION backoff.schema_version()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT version FROM backoff.schema_migrations
$$;

COMMENT ON FUNCTION backoff.schema_version() IS
'The pgbackoff migration version installed in this database. Clients compare it with the version they need and ask for `backoffctl migrate up` when it is older.';

-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- A month counts as 30 days and a day as 24 hours: the linearization
-- PostgreSQL's interval comparison uses, so a CHECK such as
-- "base <= interval '876600 hours'" and this conversion agree. (extract(epoch)
-- alone would count a year as 365.25 days but compare it as 360.) Exact: the
-- months are taken out before extract(epoch …), which is numeric.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ((extract(year FROM p_interval) * 12 + extract(month FROM p_interval)) * 2592000000000
            + extract(epoch FROM p_interval - make_interval(years => extract(year FROM p_interval)::integer,
                                                            months => extract(month FROM p_interval)::integer)) * 1000000
           )::bigint
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
-- result does too, and any delay of base (>= 1 µs) × 2^60 µs (36,559 years)
-- is above every allowed max (100 years). docs/adr/0004-identical-math-in-sql-and-go.md
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
-- included. Private: the one implementation of docs/design.md#backoff-math that every other
-- function calls. Durations are microseconds (bigint); arithmetic is in
-- float8, one operator at a time, in the same order as the Go mirror
-- (client/policy/delay.go), so both give the same result to the microsecond
-- (docs/adr/0004-identical-math-in-sql-and-go.md). Change one, change both,
-- and the shared vectors (client/policy/testdata/vectors.json) tell.
--
-- Limits (the same as the policies table's CHECKs and Policy.Validate):
-- durations 0..100 years (3155760000000000 µs, below 2^53 so exact in a
-- double), multiplier 1..1000, exponent 1..10, jitter_ratio 0 or
-- 0.000001..1 (a smaller ratio underflows float8, which PostgreSQL raises).
-- A NULL seed is seed 0.
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
    c_limit_us CONSTANT bigint := 3155760000000000;  -- 100 years
    v_delay float8;
    v_max   float8;
    v_len   integer;
    v_entry bigint;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got "%"', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 OR p_base_us > c_limit_us THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%" µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 OR p_max_us > c_limit_us THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%" µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_max := p_max_us::float8;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        -- NaN compares above every number in PostgreSQL, so "> 1000" rejects it.
        IF p_multiplier IS NULL OR NOT (p_multiplier >= 1 AND p_multiplier <= 1000) THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got "%"', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got "%"', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_entry := p_schedule_us[LEAST(p_attempt, v_len)];
        IF v_entry IS NULL OR v_entry < 0 OR v_entry > c_limit_us THEN
            RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%" µs', coalesce(v_entry::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := v_entry::float8;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    -- The cap.
    v_delay := LEAST(v_delay, v_max);

    -- Jitter, with u from md5('SEED:ATTEMPT'). Each float8 operator rounds on
    -- its own; Go converts explicitly to stop fused multiply-add.
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL
           OR NOT (p_jitter_ratio = 0 OR (p_jitter_ratio >= 0.000001 AND p_jitter_ratio <= 1)) THEN
            RAISE EXCEPTION 'jitter_ratio must be 0 or between 0.000001 and 1, got "%"', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    -- Whole microseconds, rounded down: never above the cap.
    RETURN floor(v_delay)::bigint;
END
$$;

-- backoff._policy_capped_us(policy row, attempt): the delay of a stored
-- policy for failed attempt p_attempt before jitter, capped at max_delay: the
-- float8 that backoff._delay_us computes before it applies the jitter; NULL
-- for an attempt below 1 (or NULL). Private: the part of the delay that does
-- not depend on the job, so that reap computes it once per distinct
-- (policy, counted attempt) of its batch and fail once (docs/adr/0052);
-- backoff._policy_delay_us adds the job's jitter.
--
-- No validation: a policies row passed its CHECK constraints (strategy,
-- durations within 100 years, multiplier 1..1000, exponent 1..10, a
-- non-empty schedule for strategy 'schedule'), which are _delay_us's
-- checks. The same float8 operations, in the same order, as _delay_us (and
-- the Go mirror, docs/adr/0004). PL/pgSQL, not an inlined expression, on
-- purpose: it runs once per batch and policy, and fail initialises every
-- expression of its UPDATE on each call, so a small call node beats a large
-- inlined tree there (measured in docs/adr/0052).
CREATE OR REPLACE FUNCTION backoff._policy_capped_us(
    p_policy  backoff.policies,
    p_attempt integer
)
RETURNS float8
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    c_limit CONSTANT float8 := 1152921504606846976.0;  -- 2^60
    v_delay  float8;
    v_result float8 := 1.0;
    v_square float8;
    v_k      integer;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RETURN NULL;
    END IF;
    CASE p_policy.strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8;
    WHEN 'linear' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * backoff._clamped_power(p_policy.multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        v_delay := backoff._interval_us(p_policy.base)::float8 * backoff._clamped_power(p_attempt::float8, p_policy.exponent);
    ELSE
        v_delay := backoff._interval_us(p_policy.schedule[LEAST(p_attempt, cardinality(p_policy.schedule))])::float8;
    END CASE;
    RETURN LEAST(v_delay, backoff._interval_us(p_policy.max_delay)::float8);
END
$$;

-- backoff._policy_delay_us(policy row, attempt, seed [, capped]): the delay
-- in microseconds of a stored policy for failed attempt p_attempt, jitter
-- seeded by p_seed included: what backoff._delay_us returns for the row's
-- parameters, to the bit. Private; shared by retry_delay, schedule and the
-- retry-or-dead-letter decision.
--
-- The four-argument form takes p_capped_us = backoff._policy_capped_us(
-- p_policy, p_attempt), the part that does not depend on the job, so that
-- reap computes it once per distinct (policy, counted attempt) of its batch
-- (docs/adr/0052), and adds the jitter: one expression, inlined into the
-- decision, whose only call per row is md5 (_jitter_unit) when the policy
-- has jitter. No validation: the row passed the policies table's CHECKs.
-- An attempt below 1 (or NULL) goes to _delay_us, which raises 22023 as it
-- always did. The jitter arithmetic is _delay_us's, operator for
-- operator (docs/adr/0004).
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy    backoff.policies,
    p_attempt   integer,
    p_seed      bigint,
    p_capped_us float8
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_attempt >= 1 THEN floor(
               CASE (p_policy).jitter
                   WHEN 'none' THEN p_capped_us
                   WHEN 'full' THEN p_capped_us * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)
                   WHEN 'equal'
                       THEN p_capped_us / 2 + p_capped_us / 2 * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)
                   WHEN 'proportional'
                       THEN LEAST(p_capped_us * (1 - (p_policy).jitter_ratio
                                                 + 2 * (p_policy).jitter_ratio * backoff._jitter_unit(coalesce(p_seed, 0), p_attempt)),
                                  backoff._interval_us((p_policy).max_delay)::float8)
               END)::bigint
           -- Raises 22023 "attempt must be at least 1, got ..." (the first
           -- thing _delay_us checks), as it always did.
           ELSE backoff._delay_us('none', 0, 1, 1, NULL, 0, 'none', 0, p_attempt, p_seed)
           END
$$;

-- The three-argument form, for one delay at a time (retry_delay, schedule).
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy  backoff.policies,
    p_attempt integer,
    p_seed    bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT backoff._policy_delay_us(p_policy, p_attempt, p_seed, backoff._policy_capped_us(p_policy, p_attempt))
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
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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

-- backoff.compute_delay(...): the backoff delay of docs/design.md#backoff-math for explicit
-- policy parameters, no table involved: pure and IMMUTABLE, so it can be
-- used in indexes, generated columns, and by callers that keep their policy
-- elsewhere. Parameters a strategy or jitter does not use are ignored.
CREATE OR REPLACE FUNCTION backoff.compute_delay(
    p_strategy     text,
    p_base         interval,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule     interval[],
    p_max          interval,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c_limit CONSTANT interval := interval '876600 hours';  -- 100 years of 365.25 days
    v_entry interval;
BEGIN
    -- Intervals are checked before they become microseconds: a huge interval
    -- would otherwise fail as a bigint overflow instead of a clear 22023.
    IF p_base IS NULL OR p_base < interval '0' OR p_base > c_limit THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%"', coalesce(p_base::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max IS NULL OR p_max < interval '0' OR p_max > c_limit THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%"', coalesce(p_max::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_strategy = 'schedule' THEN
        FOREACH v_entry IN ARRAY coalesce(p_schedule, '{}') LOOP
            IF v_entry IS NULL OR v_entry < interval '0' OR v_entry > c_limit THEN
                RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%"', coalesce(v_entry::text, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    RETURN backoff._delay_us(
        p_strategy,
        backoff._interval_us(p_base),
        p_multiplier,
        p_exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest(p_schedule) AS s),
        backoff._interval_us(p_max),
        p_jitter,
        p_jitter_ratio,
        p_attempt,
        p_seed) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.compute_delay(text, interval, float8, integer, interval[], interval, text, float8, integer, bigint) IS
'Backoff delay before the retry that follows failed attempt p_attempt (1-based), from explicit policy parameters: strategy none|fixed|linear|exponential|polynomial|schedule, then the cap p_max, then jitter none|full|equal|proportional with u from md5(''SEED:ATTEMPT''). Pure and IMMUTABLE; identical to the Go mirror (client/policy) to the microsecond. Raises 22023 naming the bad parameter. docs/policies.md has the formulas.
Example: SELECT backoff.compute_delay(''exponential'', ''1 second'', 2.0, 2, ''{}'', ''1 minute'', ''proportional'', 0.1, 3, 42);';

-- backoff.schedule(policy, attempts, seed): the retry timeline of a named
-- policy, one row per failed attempt: the delay before the next try (jitter
-- included, from p_seed) and the cumulative wait since the first failure.
-- Every row comes from backoff._policy_delay_us, the function fail and reap
-- use, so the timeline is what jobs will really do.
CREATE OR REPLACE FUNCTION backoff.schedule(
    p_policy   text,
    p_attempts integer DEFAULT 10,
    p_seed     bigint DEFAULT 0
)
RETURNS TABLE (attempt integer, delay interval, cumulative interval)
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    -- 1000 rows of at most 100 years each stay inside interval's range.
    IF p_attempts IS NULL OR p_attempts < 1 OR p_attempts > 1000 THEN
        RAISE EXCEPTION 'attempts must be between 1 and 1000, got "%"', coalesce(p_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT g.n, d.v_delay, sum(d.v_delay) OVER (ORDER BY g.n)
        FROM generate_series(1, p_attempts) AS g(n)
        CROSS JOIN LATERAL (
            SELECT backoff._policy_delay_us(v_policy, g.n, coalesce(p_seed, 0)) * interval '1 microsecond' AS v_delay
        ) AS d
        ORDER BY g.n;
END
$$;

COMMENT ON FUNCTION backoff.schedule(text, integer, bigint) IS
'The retry timeline of the named policy: for failed attempts 1..p_attempts (at most 1000), the delay before the next try (jitter included, deterministic from p_seed, as for a job whose id is p_seed) and the cumulative wait. What an operator reads before choosing a policy; backoffctl schedule prints the same numbers. Raises 22023 for an unknown policy.
Example: SELECT * FROM backoff.schedule(''moderate'', 5, 42);';

-- backoff._step_backoff(request, attempts, max, multiplier): validates the
-- parameters of calculate_step_next_retry_time and returns the delay of its
-- fallback path, LEAST(multiplier^attempts seconds, max seconds). Private;
-- shared by the timestamptz and timestamp overloads.
--
-- tasker-core's expression power(multiplier, attempts) overflows numeric
-- (and float8) for large attempts. Here the cap is decided before any
-- exponentiation: when attempts × ln(multiplier) exceeds ln(max) + 1, the
-- power is above e × max and the result is max; the margin of 1 is far wider
-- than any float8 rounding of the logarithms. Otherwise the power is at most
-- about 2.7 × max (≤ 5.9e9) and is computed with the original expression,
-- so every result the original could compute comes out the same: numeric
-- power, then PostgreSQL's interval multiplication, which rounds fractional
-- seconds to the nearest microsecond (1.1^3 → 1.331 s).
--
-- attempts NULL follows the original too: LEAST ignores the NULL power, so
-- the delay is max.
CREATE OR REPLACE FUNCTION backoff._step_backoff(
    p_request_seconds integer,
    p_attempts        integer,
    p_max_seconds     integer,
    p_multiplier      numeric
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_max interval;
BEGIN
    IF p_request_seconds < 0 THEN
        RAISE EXCEPTION 'backoff_request_seconds must not be negative, got "%"', p_request_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempts < 0 THEN
        RAISE EXCEPTION 'attempts must not be negative, got "%"', p_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_seconds IS NULL OR p_max_seconds <= 0 THEN
        RAISE EXCEPTION 'p_max_backoff_seconds must be positive, got "%"', coalesce(p_max_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- NaN is neither < 1 nor finite; 'Infinity' is not finite.
    IF p_multiplier IS NULL OR p_multiplier = 'NaN'::numeric OR p_multiplier = 'Infinity'::numeric
       OR p_multiplier < 1 THEN
        RAISE EXCEPTION 'p_backoff_multiplier must be a finite number of at least 1, got "%"', coalesce(p_multiplier::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_max := p_max_seconds * interval '1 second';
    IF p_attempts IS NULL THEN
        RETURN v_max;
    END IF;
    IF p_attempts > 0 AND p_multiplier > p_max_seconds THEN
        RETURN v_max;  -- multiplier^attempts >= multiplier > max (and ln needs no huge float8)
    END IF;
    IF p_attempts::float8 * ln(p_multiplier::float8) > ln(p_max_seconds::float8) + 1 THEN
        RETURN v_max;
    END IF;
    RETURN LEAST(power(p_multiplier, p_attempts::numeric) * interval '1 second', v_max);
END
$$;

-- backoff.calculate_step_next_retry_time(...): tasker-core's dual-path rule
-- (TAS-57), drop-in, with its parameter names and defaults: an explicit
-- request (backoff_request_seconds after last_attempted_at) wins; otherwise
-- failure_time + LEAST(multiplier^attempts seconds, max seconds); otherwise
-- NULL. Unlike the original it never overflows (attempts up to 2^31-1), and
-- rejects invalid parameters with 22023 whichever path applies. Fractional
-- seconds of the power are kept to the microsecond (rounded to nearest, as
-- the original expression does). The timestamp overload serves users of the
-- original's timestamp-without-time-zone columns.
CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamptz,
    failure_time            timestamptz,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamp,
    failure_time            timestamp,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamptz, timestamptz, integer, integer, numeric) IS
'tasker-core''s dual-path retry time: last_attempted_at + backoff_request_seconds when both are given; else failure_time + LEAST(p_backoff_multiplier^attempts, p_max_backoff_seconds) seconds (fractions kept to the microsecond); else NULL. Never overflows, for any attempts up to 2^31-1. Raises 22023 naming the parameter for negative attempts or backoff_request_seconds, p_max_backoff_seconds <= 0, p_backoff_multiplier < 1, NaN or infinite.
Example: SELECT backoff.calculate_step_next_retry_time(NULL, NULL, ''2025-01-01 00:00:00+00'', 3);  -- 00:00:08';

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamp, timestamp, integer, integer, numeric) IS
'The timestamp-without-time-zone overload of calculate_step_next_retry_time, for drop-in users of tasker-core''s original: same rule, same errors.
Example: SELECT backoff.calculate_step_next_retry_time(30, ''2025-01-01 00:00:00'', NULL, 0);  -- 00:00:30';

-- backoff._iso8601(at): a timestamptz as ISO 8601 in UTC with microseconds
-- ("2026-01-02T03:04:05.000006Z"), whatever the session's TimeZone. Private;
-- used for the error history and for BK004's DETAIL, which clients parse.
CREATE OR REPLACE FUNCTION backoff._iso8601(p_at timestamptz)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- backoff._push_error(errors, attempt, counted, at, error, worker, kind,
-- started, role): the job's history with one entry appended, keeping the
-- 20 most recent entries (the oldest are dropped). Entries are objects
-- {"attempt", "counted", "at" (ISO 8601 UTC), "error", "worker", "kind"}
-- and, when known, "started" (ISO 8601 UTC) and "role":
-- attempt is the fencing token of the attempt (attempts, unique per claim),
-- counted its place in the budget (attempts - uncounted_attempts, what
-- max_attempts bounds: docs/adr/0020). kind 'error' (a handler's failure)
-- or 'lease_expired' (reaped) is a failed attempt, with started = when it
-- was claimed (last_attempted_at), so that a timeline can draw it; kind
-- 'replayed' or 'cancelled' is an operator's action (docs/adr/0066), with
-- role = the database role that asked; it is no attempt and nothing
-- counts it as one. Private; used by fail, reap, cancel and the replays.
-- One expression, so PostgreSQL inlines it into the UPDATE; the JSON path
-- runs only when there is something to drop (it costs about as much as the
-- rest of the entry).
CREATE OR REPLACE FUNCTION backoff._push_error(
    p_errors  jsonb,
    p_attempt integer,
    p_counted integer,
    p_at      timestamptz,
    p_error   text,
    p_worker  text,
    p_kind    text,
    p_started timestamptz DEFAULT NULL,
    p_role    text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_array_length(p_errors) < 20 THEN p_errors
                ELSE jsonb_path_query_array(p_errors, '$[last - 18 to last]') END
        || jsonb_build_array(jsonb_build_object(
               'attempt', p_attempt,
               'counted', p_counted,
               'at', backoff._iso8601(p_at),
               'error', p_error,
               'worker', p_worker,
               'kind', p_kind)
           || CASE WHEN p_started IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('started', backoff._iso8601(p_started)) END
           || CASE WHEN p_role IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('role', p_role) END)
$$;

-- backoff._governing_policy(policy, queue): the name of the policy that
-- governs a job, the one answer to that question
-- (docs/adr/0030-one-policy-answer.md): the job's recorded policy if it
-- names a row of backoff.policies, else its queue's (backoff.queues), else
-- 'default'. A name with no row (a policy deleted after the job was
-- enqueued) falls through to the next candidate, so a job is never stuck
-- for want of a policy.
--
-- Private. A one-row set-returning SQL function so that PostgreSQL inlines
-- it into the caller's query where it is used in FROM (as
-- backoff._retry_decision, docs/adr/0041): enqueue's INSERT then runs its
-- two primary-key look-ups as part of its own plan, once per statement for
-- one job and as a correlated subplan per row for a bulk enqueue, instead of
-- a PL/pgSQL call per job (profile in docs/benchmarks.md). A scalar SQL
-- function with sub-selects is never inlined, hence the table form.
--
-- backoff._job_policy_name(policy, queue) is the same answer as a scalar,
-- for the other callers (_job_policy, job_policy, pause_queue).
-- Both are called from SECURITY DEFINER functions with a pinned search_path.
CREATE OR REPLACE FUNCTION backoff._governing_policy(p_policy text, p_queue text)
RETURNS TABLE (name text)
LANGUAGE sql
STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT coalesce(
        (SELECT p.name FROM backoff.policies AS p WHERE p.name = p_policy),
        (SELECT q.policy FROM backoff.queues AS q WHERE q.name = p_queue),
        'default')
$$;

CREATE OR REPLACE FUNCTION backoff._job_policy_name(p_policy text, p_queue text)
RETURNS text
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
BEGIN
    -- PL/pgSQL, not SQL: a scalar SQL function with a FROM is never inlined,
    -- and an SQL function that is not inlined sets up its executor on every
    -- call (about 80 µs measured); PL/pgSQL plans the query once per session.
    RETURN (SELECT g.name FROM backoff._governing_policy(p_policy, p_queue) AS g);
END
$$;

-- backoff.job_policy(policy, queue): the name of the policy that governs a
-- job, for clients and operators; the answer is backoff._job_policy_name's
-- (docs/adr/0030-one-policy-answer.md).
CREATE OR REPLACE FUNCTION backoff.job_policy(p_policy text, p_queue text)
RETURNS text
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._job_policy_name(p_policy, p_queue)
$$;

COMMENT ON FUNCTION backoff.job_policy(text, text) IS
'The name of the policy that governs a job whose recorded policy is p_policy (backoff.jobs.policy) in queue p_queue: p_policy if it names a row of backoff.policies, else the queue''s policy (backoff.queues), else ''default''. It is the same answer every function uses: enqueue records it; claim, acquire, heartbeat, fail and reap take that policy''s lease and retry curve; backoffctl and the Go client show it.
Example:
SELECT backoff.job_policy(NULL, ''emails'');
SELECT id, backoff.job_policy(policy, queue) FROM backoff.jobs;';

-- backoff._job_policy(policy, queue): the row of the policy that governs a
-- job, as backoff._job_policy_name names it; with no such row (no 'default' row
-- either) it raises 22023. Private; PL/pgSQL so
-- that its plans are cached (docs/adr/0008-single-retry-decision.md).
CREATE OR REPLACE FUNCTION backoff._job_policy(p_policy text, p_queue text)
RETURNS backoff.policies
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_policy backoff.policies;
    -- Named once: in the WHERE clause the call would run for every row a
    -- sequential scan of backoff.policies reads (the plan for a small,
    -- analyzed table), four calls per fail or reap batch with the shipped
    -- profiles (docs/adr/0052).
    v_name   text := backoff._job_policy_name(p_policy, p_queue);
BEGIN
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = v_name;
    IF FOUND THEN
        RETURN v_policy;
    END IF;
    RAISE EXCEPTION 'unknown policy "%" and no "default" policy', coalesce(p_policy, 'NULL')
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- backoff._clamp_time(timestamptz): the time kept inside years 1 to 9999
-- (UTC), the range every client can represent (ADR 0039; a Go
-- time.Time marshals to JSON only up to year 9999). Private; applied to
-- every run_at and lease_until computed as a time plus an interval, so that
-- a long delay near the end of the range means "as late as possible"
-- instead of a year-10000 value that breaks readers. One expression, so it
-- is inlined.
CREATE OR REPLACE FUNCTION backoff._clamp_time(p_time timestamptz)
RETURNS timestamptz
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT LEAST(GREATEST(p_time, '0001-01-01 00:00:00+00'::timestamptz),
                            '9999-12-31 23:59:59.999999+00'::timestamptz)
$$;

-- backoff._retry_decision(...): THE decision "retry at T, or dead-letter
-- with a reason" for a failed attempt. It exists once: fail (one row) and
-- reap (a batch of expired leases) both take it, so a reported failure and
-- a silent crash are judged identically
-- (docs/adr/0008-single-retry-decision.md). Pure: everything it needs is a
-- parameter, time included.
--
-- p_attempts is the counted attempt that failed, attempts -
-- uncounted_attempts (docs/adr/0020): claims given back by snooze or
-- before a replay do not count against max attempts nor grow the delay.
-- p_lease_expiries is how many times the job's lease expired, this expiry
-- included when reap asks (docs/adr/0046).
-- In order:
--   not p_retryable                          -> dead_lettered, 'non_retryable'
--   p_lease_expiries >= policy.max_lease_expiries
--                                            -> dead_lettered, 'lease_expiries'
--   p_attempts >= max attempts               -> dead_lettered, 'max_attempts'
--   next run after created_at + deadline     -> dead_lettered, 'deadline'
--   otherwise                                -> retrying at the next run
-- where max attempts = coalesce(p_max_attempts, policy.max_attempts) and the
-- next run = p_now + (p_retry_in clamped to policy.max_delay when given,
-- else the policy's delay for counted attempt p_attempts seeded by the job id).
-- p_capped_us is backoff._policy_capped_us(p_policy, p_attempts), the part
-- of that delay that does not depend on the job: the caller computes it
-- (reap once per distinct policy and counted attempt of its batch,
-- docs/adr/0052) and the decision adds the job's jitter
-- (backoff._policy_delay_us); it is an input, not a second decision.
-- A dead letter keeps its run_at and gets completed_at = p_now.
--
-- Shape (docs/adr/0041-set-based-reap-and-inlined-decision.md): one SQL
-- SELECT returning one row, so that PostgreSQL inlines it into the caller's
-- query as a subquery (a set-returning LANGUAGE sql function that is not
-- STRICT, VOLATILE or SECURITY DEFINER is inlined where it is used in FROM):
-- no function call, no PL/pgSQL per row. Callers pass the policy as a column
-- (a Var), not as a function call: an inlined function's argument is copied
-- into every place the body uses it. The next run is computed once (the
-- OFFSET 0 keeps its subquery from being flattened into both places that
-- read it), and the policy's delay only for a job that is retried.
CREATE OR REPLACE FUNCTION backoff._retry_decision(
    p_policy       backoff.policies,
    p_capped_us    float8,
    p_job_id       bigint,
    p_attempts     integer,
    p_max_attempts integer,
    p_lease_expiries integer,
    p_created_at   timestamptz,
    p_run_at       timestamptz,
    p_retry_in     interval,
    p_retryable    boolean,
    p_now          timestamptz
)
RETURNS TABLE (status text, run_at timestamptz, dead_letter_reason text, completed_at timestamptz)
LANGUAGE sql
STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT CASE WHEN r.reason IS NULL THEN 'retrying' ELSE 'dead_lettered' END,
           CASE WHEN r.reason IS NULL THEN backoff._clamp_time(n.next_run) ELSE p_run_at END,
           r.reason,
           CASE WHEN r.reason IS NOT NULL THEN p_now END
    FROM (SELECT CASE
                     WHEN NOT p_retryable
                          OR p_lease_expiries >= (p_policy).max_lease_expiries
                          OR p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN NULL
                     WHEN p_retry_in IS NULL
                         THEN p_now + backoff._policy_delay_us(p_policy, p_attempts, p_job_id, p_capped_us) * interval '1 microsecond'
                     ELSE p_now + least(p_retry_in, (p_policy).max_delay)
                 END AS next_run
          OFFSET 0) AS n
    CROSS JOIN LATERAL (
        SELECT CASE
                   WHEN NOT p_retryable THEN 'non_retryable'
                   WHEN p_lease_expiries >= (p_policy).max_lease_expiries THEN 'lease_expiries'
                   WHEN p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN 'max_attempts'
                   WHEN (p_policy).deadline IS NOT NULL
                        AND n.next_run > p_created_at + (p_policy).deadline THEN 'deadline'
               END AS reason) AS r
$$;

-- backoff._raise_fencing_error(action, job id, attempt): raises the error
-- for a guarded UPDATE on a running attempt (complete, fail, heartbeat,
-- snooze) that matched no row. It runs only after that UPDATE, so it reads
-- the row as it is now and never decides before writing:
--   NULL id or attempt, attempt < 1     -> 22023
--   no such job, or (scoped caller) a job of a queue it may not work on
--                                       -> BK001, the same message
--   completed, dead_lettered, cancelled -> BK003
--   otherwise (pending, retrying, or running another attempt) -> BK002
-- Private. Always raises.
CREATE OR REPLACE FUNCTION backoff._raise_fencing_error(
    p_action  text,
    p_job_id  bigint,
    p_attempt integer
)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_status   text;
    v_attempts integer;
    v_queue    text;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot % job "NULL": job id must not be null', p_action
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'cannot % job "%": attempt must be at least 1, got "%"',
            p_action, p_job_id, coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.status, j.attempts, j.queue INTO v_status, v_attempts, v_queue
    FROM backoff.jobs AS j
    WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    -- A scoped caller learns nothing about another queue's job: to it the
    -- job does not exist.
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_job_scope(p_job_id, v_queue);
    END IF;
    IF v_status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot % job "%": it is "%"', p_action, p_job_id, v_status
            USING ERRCODE = 'BK003';
    END IF;
    IF v_status = 'running' THEN
        RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is running attempt "%"',
            p_action, p_job_id, p_attempt, v_attempts
            USING ERRCODE = 'BK002';
    END IF;
    RAISE EXCEPTION 'cannot % job "%": attempt "%" is stale, the job is "%" after attempt "%"',
        p_action, p_job_id, p_attempt, v_status, v_attempts
        USING ERRCODE = 'BK002';
END
$$;

-- backoff._valid_span(interval): true for NULL or a finite interval of at
-- most 876600 hours (100 years of 365.25 days, the bound of every policy
-- duration). Private. Leases, delays and windows beyond it would push a
-- timestamp out of PostgreSQL's range (22008) or, on PostgreSQL 17 where
-- intervals can be infinite, leave a lease that never expires; the callers
-- refuse them with 22023 instead.
CREATE OR REPLACE FUNCTION backoff._valid_span(p_value interval)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_value IS NULL
        OR (pg_catalog.isfinite(p_value) AND p_value <= interval '876600 hours' AND p_value >= interval '-876600 hours')
$$;

-- backoff._now(p_now): the time a function works at (ADR 0035,
-- docs/adr/0035-time-is-not-a-privilege.md). Private; every public function
-- that takes p_now starts with p_now := backoff._now(p_now).
--   NULL or now()  -> now(), the transaction's clock, without reading any
--                     table (the hot path of every client without a clock);
--   not finite, or outside years 1 to 9999 (UTC) -> 22023 naming it;
--   otherwise      -> p_now, when backoff.settings.time_injection is on, or
--                     the caller is a member of backoff_admin, or it lies
--                     behind now() by at most max_clock_skew;
--                     now(), when it lies ahead of now() by at most
--                     max_clock_skew (docs/adr/0057): a host clock a
--                     little fast still works, but its lead is no licence
--                     to reap a live lease, claim or acquire a job before
--                     it is due, end a breaker's cooldown or refill a
--                     bucket early, nor to store a time (a bucket's
--                     refilled_at) that others are then measured from;
--                     else 22023.
-- A clock behind now() only delays what the caller decides, so it is kept
-- (records and late decisions are the caller's own, as before).
-- The caller is the role the session acts as: the SET ROLE role, else the
-- login (session_user). current_user cannot say it: the public functions
-- are SECURITY DEFINER, so inside them it is always backoff_owner. A missing
-- settings row means the defaults (5 minutes, no injection).
--
-- Two functions: backoff._now is the hot path as an inlinable SQL
-- expression (a PL/pgSQL caller's `p_now := backoff._now(p_now)` then costs
-- no function call when p_now is NULL or now(), the common case), and
-- backoff._injected_now (created first: an SQL body is checked when it is
-- created) checks every other value.
CREATE OR REPLACE FUNCTION backoff._injected_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_skew      interval;
    v_injection boolean;
    v_role      text;
BEGIN
    IF NOT (p_now >= '0001-01-01 00:00:00+00'::timestamptz AND p_now < '10000-01-01 00:00:00+00'::timestamptz) THEN
        RAISE EXCEPTION 'now must be a finite time between years 1 and 9999, got "%"', p_now
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.max_clock_skew, s.time_injection INTO v_skew, v_injection FROM backoff.settings AS s;
    IF v_injection THEN
        RETURN p_now;
    END IF;
    v_skew := coalesce(v_skew, interval '5 minutes');
    -- Behind the clock, within the skew: no role to look up.
    IF p_now >= pg_catalog.now() - v_skew AND p_now <= pg_catalog.now() THEN
        RETURN p_now;
    END IF;
    v_role := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user::text);
    IF pg_catalog.pg_has_role(v_role, 'backoff_admin', 'MEMBER') THEN
        RETURN p_now;
    END IF;
    -- Ahead of the clock, within the skew: the database's clock, so that
    -- no decision takes effect early (docs/adr/0057).
    IF p_now > pg_catalog.now() AND p_now <= pg_catalog.now() + v_skew THEN
        RETURN pg_catalog.now();
    END IF;
    RAISE EXCEPTION 'now "%" is further than max_clock_skew "%" from the database clock "%"', p_now, v_skew, pg_catalog.now()
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'pass NULL for the database clock; only backoff_admin may inject time, unless backoff.settings.time_injection is on';
END
$$;

CREATE OR REPLACE FUNCTION backoff._now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql
STABLE
AS $$
    SELECT CASE WHEN p_now IS NULL OR p_now = pg_catalog.now() THEN pg_catalog.now()
                ELSE backoff._injected_now(p_now) END
$$;

-- backoff._check_name(what, value): value itself when it is a name of 1 to
-- 128 bytes without control characters (C0, DEL, C1) or Unicode format
-- characters (general category Cf: zero-width characters, bidi marks,
-- embeddings, overrides and isolates, the byte order mark, tags);
-- otherwise 22023 naming the value with those characters escaped
-- (docs/adr/0039, docs/adr/0059), raised by backoff._bad_name. Private;
-- every function that stores a queue, policy, schedule, worker or dedupe
-- key, or works on a queue by name (claim, acquire, the waits, pause and
-- resume, queue_state, replay_dead_letters), checks it here; look-ups and
-- filters (list_jobs, count_jobs, the dead-letter reads, revoke_queue) do
-- not, as a name no row holds matches nothing there. So a stored name can
-- always be notified (NOTIFY payloads are limited to 8000 bytes), indexed,
-- replayed and printed on one terminal line, and two names that look the
-- same are the same name (a queue "emails" followed by a zero-width space
-- would sit unseen beside "emails").
--
-- A SQL function that PostgreSQL inlines: called as an assignment
-- (p_queue := backoff._check_name('queue', p_queue)) it is a PL/pgSQL
-- simple expression, evaluated without a query (a PERFORM would run one
-- through SPI on every call of the hot path).

-- backoff._bad_name_chars(): the characters a name may not hold, as one
-- bracket expression: C0 but NUL (which text cannot hold), DEL, C1, and
-- every Cf character of Unicode 15 (client.ValidName refuses the
-- same set; a test compares the two over every code point). A constant,
-- folded into the callers' plans.
CREATE OR REPLACE FUNCTION backoff._bad_name_chars()
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT '[\x01-\x1f\x7f\u0080-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]'::text
$$;

-- The error path: the first 64 characters of the value, each refused
-- character written as \uXXXX (\UXXXXXXXX above the BMP), so the message
-- shows what was refused without carrying it to a log or terminal.
CREATE OR REPLACE FUNCTION backoff._bad_name(p_what text, p_value text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_shown text;
BEGIN
    SELECT pg_catalog.string_agg(
               CASE
                   WHEN c.ch OPERATOR(pg_catalog.!~) backoff._bad_name_chars() THEN c.ch
                   WHEN pg_catalog.ascii(c.ch) > 65535
                       THEN '\U' || pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(c.ch))), 8, '0')
                   ELSE '\u' || pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(c.ch))), 4, '0')
               END, '' ORDER BY c.n)
    INTO v_shown
    FROM pg_catalog.regexp_split_to_table(pg_catalog.left(coalesce(p_value, 'NULL'), 64), '') WITH ORDINALITY AS c(ch, n);
    RAISE EXCEPTION '% must be 1 to 128 bytes without control or format characters, got "%" (% bytes)',
        p_what,
        coalesce(v_shown, '') || CASE WHEN pg_catalog.length(p_value) > 64 THEN '...' ELSE '' END,
        coalesce(pg_catalog.octet_length(p_value), 0)
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

CREATE OR REPLACE FUNCTION backoff._check_name(p_what text, p_value text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN pg_catalog.octet_length(p_value) BETWEEN 1 AND 128
             AND p_value OPERATOR(pg_catalog.!~) backoff._bad_name_chars()
        THEN p_value
        ELSE backoff._bad_name(p_what, p_value)
    END
$$;

-- backoff._span_text(span): a duration as an operator reads it, in its two
-- largest units: 45s, 12m 3s, 2h 5m, 3d 4h (a negative one is 0s; NULL
-- is NULL).
-- Private.
CREATE OR REPLACE FUNCTION backoff._span_text(p_span interval)
RETURNS text
LANGUAGE sql
STABLE
STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
               WHEN x.s >= 86400 THEN pg_catalog.format('%sd %sh', x.s / 86400, x.s % 86400 / 3600)
               WHEN x.s >= 3600 THEN pg_catalog.format('%sh %sm', x.s / 3600, x.s % 3600 / 60)
               WHEN x.s >= 60 THEN pg_catalog.format('%sm %ss', x.s / 60, x.s % 60)
               ELSE pg_catalog.format('%ss', x.s)
           END
    FROM (SELECT GREATEST(pg_catalog.floor(EXTRACT(epoch FROM p_span)), 0)::bigint AS s) AS x
$$;

-- backoff._note_maintenance(task, worker, now): record that a maintenance
-- call (reap, rotate, fire_schedules; 'truncate' when rotate truncated a
-- segment) ran at p_now, and that p_worker (when not NULL) made it, for
-- backoff.liveness (docs/adr/0079). A row updated by every caller at every
-- call would keep a dead version per call while any snapshot is held, so
-- each row is written at most once every 15 seconds: the check is a read,
-- the write happens only when the stored time is older, and a row another
-- caller is writing is passed by (SKIP LOCKED), so no caller waits. A time
-- never moves back (a caller whose clock is behind writes nothing). A
-- 'truncate' is written whenever rotate truncates, which is rare. A
-- worker's row is inserted once; when a new worker appears, rows of
-- workers not seen for a day are deleted. Private: the maintenance calls,
-- SECURITY DEFINER, call it as the tables' owner.
CREATE OR REPLACE FUNCTION backoff._note_maintenance(
    p_task   text,
    p_worker text,
    p_now    timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_every constant interval := interval '15 seconds';
    v_new   boolean;
BEGIN
    UPDATE backoff.maintenance AS m
    SET ran_at = p_now
    WHERE m.task = (SELECT t.task FROM backoff.maintenance AS t
                    WHERE t.task = p_task
                      AND (t.ran_at IS NULL OR t.ran_at < p_now - CASE WHEN p_task = 'truncate' THEN interval '0' ELSE v_every END)
                    FOR UPDATE SKIP LOCKED);
    IF p_worker IS NULL
       OR EXISTS (SELECT FROM backoff.maintenance_workers AS w
                  WHERE w.worker = p_worker AND w.seen_at >= p_now - v_every) THEN
        RETURN;
    END IF;
    INSERT INTO backoff.maintenance_workers AS w (worker, seen_at)
    VALUES (p_worker, p_now)
    ON CONFLICT (worker) DO UPDATE SET seen_at = GREATEST(w.seen_at, excluded.seen_at)
    RETURNING w.xmax = 0 INTO v_new;
    IF v_new THEN
        DELETE FROM backoff.maintenance_workers AS w WHERE w.seen_at < p_now - interval '1 day';
    END IF;
END
$$;

-- backoff._error_text(text): an error text as it is stored in last_error
-- and in the history (ADR 0039): at most 8192 bytes; a longer text is
-- cut at a character boundary and ends with the marker
-- " [truncated: N bytes]" (N = the original size), so that 20 history
-- entries hold at most about 160 KiB whatever a worker sends. (NUL and
-- invalid UTF-8 cannot reach the server as text; the Go client replaces
-- them before sending.) Private; used by fail.
CREATE OR REPLACE FUNCTION backoff._error_text(p_error text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_size integer := pg_catalog.octet_length(p_error);
    v_text text;
BEGIN
    IF v_size IS NULL OR v_size <= 8192 THEN
        RETURN p_error;
    END IF;
    -- 8192 bytes in all, marker included (the marker is under 40 bytes).
    v_text := pg_catalog.left(p_error, 8150);
    WHILE pg_catalog.octet_length(v_text) > 8150 LOOP
        -- A character is 1 to 4 bytes: dropping a quarter of the excess
        -- (at least one character) never overshoots by much.
        v_text := pg_catalog.left(v_text, pg_catalog.length(v_text)
            - greatest((pg_catalog.octet_length(v_text) - 8150 + 3) / 4, 1));
    END LOOP;
    RETURN v_text || ' [truncated: ' || v_size || ' bytes]';
END
$$;

-- backoff._check_payload(payloads): 22023 when a payload is larger than
-- backoff.settings.max_payload_bytes (docs/adr/0059), naming its size, the
-- limit and, in a batch, its place. Private; enqueue calls it only for a
-- payload over 1 KiB (the smallest limit the setting allows) or one that
-- arrives compressed, so the common small payload costs no read of the
-- settings; the bulk enqueue calls it once for the whole batch.
--
-- The size is the payload's jsonb size, uncompressed: pg_column_size of an
-- element of an array, which PostgreSQL always holds decompressed (a
-- payload read from a table column reaches enqueue compressed, and its
-- compressed size would let a large, repetitive payload through). It is
-- what the value costs in memory and on the wire, within a few bytes of its
-- text.
CREATE OR REPLACE FUNCTION backoff._check_payload(p_payloads jsonb[])
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_max  integer;
    v_ord  bigint;
    v_size integer;
BEGIN
    -- A missing settings row means the column's default.
    SELECT s.max_payload_bytes INTO v_max FROM backoff.settings AS s;
    v_max := coalesce(v_max, 1048576);
    SELECT t.ord, pg_catalog.pg_column_size(t.payload) INTO v_ord, v_size
    FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS t(payload, ord)
    WHERE pg_catalog.pg_column_size(t.payload) > v_max
    ORDER BY t.ord
    LIMIT 1;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;
    IF pg_catalog.cardinality(p_payloads) = 1 THEN
        RAISE EXCEPTION 'payload is % bytes, over max_payload_bytes (% bytes)', v_size, v_max
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'store large data elsewhere and enqueue a reference to it; an admin sets the limit in backoff.settings';
    END IF;
    RAISE EXCEPTION 'payload % of the batch is % bytes, over max_payload_bytes (% bytes)', v_ord, v_size, v_max
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'store large data elsewhere and enqueue a reference to it; an admin sets the limit in backoff.settings';
END
$$;

-- backoff._queue_scope(privilege): the queues the caller may act on with
-- p_privilege ('produce' or 'work'), as LIKE patterns, or NULL when the
-- caller is not scoped (docs/adr/0038-queue-scoped-privileges.md,
-- docs/adr/0058-queue-scope-fails-closed.md).
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
-- A caller without any grant: with backoff.settings.require_queue_grants
-- on (a missing row counts as on), its scope is empty, i.e. no queue,
-- unless the role it acts as (SET ROLE, else the login) is a superuser or a
-- member of backoff_admin or backoff_owner, which write the tables anyway.
-- Off, it is not scoped: every queue.
--
-- Cost: a superuser login stops at the GUC read; otherwise one probe of the
-- grants and of the settings row, and with grants present one scan of the
-- grants table per identity with pg_has_role (cached membership). Private;
-- called once per call by backoff._check_queue, backoff._check_job_scope,
-- reap, complete_many and backoff.job.
CREATE OR REPLACE FUNCTION backoff._queue_scope(p_privilege text)
RETURNS text[]
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    -- The SET ROLE role, if any. The GUC is_superuser describes the
    -- caller's effective role (this role, else the login) even inside a
    -- SECURITY DEFINER function, at no cost.
    v_set_role name := NULLIF(pg_catalog.current_setting('role'), 'none');
    v_super    boolean := pg_catalog.current_setting('is_superuser') = 'on';
    v_grants   boolean;
    v_require  boolean;
    v_who      name;
    v_n        bigint;
    v_scope    text[];
BEGIN
    IF v_set_role IS NULL AND v_super THEN
        RETURN NULL;  -- a superuser login
    END IF;
    SELECT EXISTS (SELECT FROM backoff.queue_grants),
           NOT EXISTS (SELECT FROM backoff.settings AS s WHERE NOT s.require_queue_grants)
    INTO v_grants, v_require;
    IF v_grants THEN
        FOREACH v_who IN ARRAY ARRAY[session_user, v_set_role]::name[] LOOP
            CONTINUE WHEN v_who IS NULL;
            -- One scan of the (small) grants table: is v_who scoped, and to what?
            SELECT count(*), coalesce(pg_catalog.array_agg(g.pattern) FILTER (WHERE g.privilege = p_privilege), '{}')
            INTO v_n, v_scope
            FROM backoff.queue_grants AS g
            WHERE pg_catalog.pg_has_role(v_who, g.role, 'MEMBER');
            CONTINUE WHEN v_n = 0;
            -- Superusers are members of every role: never scoped. The SET ROLE
            -- role's status is v_super; the login's needs the catalog (only
            -- when it is a member of a granted role).
            CONTINUE WHEN CASE WHEN v_who = v_set_role OR v_set_role IS NULL THEN v_super
                               ELSE coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = v_who), true) END;
            RETURN v_scope;
        END LOOP;
    END IF;
    -- No grant applies to the caller.
    IF v_require AND NOT v_super THEN
        v_who := coalesce(v_set_role, session_user);
        IF NOT (pg_catalog.pg_has_role(v_who, 'backoff_admin', 'MEMBER')
                OR pg_catalog.pg_has_role(v_who, 'backoff_owner', 'MEMBER')) THEN
            RETURN '{}';
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- backoff._scope_in_force(): whether the caller may be scoped by queue: it
-- does not act as a superuser (never scoped; the GUC is_superuser describes
-- the session's effective role even inside a definer function), and a grant
-- exists (backoff.grant_queue) or backoff.settings says
-- require_queue_grants (a missing row counts as on). When false the
-- functions skip backoff._check_queue: they call it as
--   IF backoff._scope_in_force() THEN PERFORM backoff._check_queue(...); END IF;
-- (docs/adr/0058-queue-scope-fails-closed.md), an expression PL/pgSQL
-- evaluates without starting an executor, where PERFORM ... WHERE started
-- one for every call (about 10,000 instructions). Private.
--
-- PL/pgSQL, not SQL: an SQL function whose body holds sub-selects is never
-- inlined, so every call ran the SQL-function executor (31 µs a call in the
-- RETURNING of enqueue's INSERT, half of enqueue's time); here a superuser
-- costs one GUC read, anyone else two probes of one-row or empty tables
-- through cached plans.
CREATE OR REPLACE FUNCTION backoff._scope_in_force()
RETURNS boolean
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF pg_catalog.current_setting('is_superuser') = 'on' THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT FROM backoff.queue_grants)
        OR NOT EXISTS (SELECT FROM backoff.settings AS s WHERE NOT s.require_queue_grants);
END
$$;

-- backoff._work_scope(): the queues the caller may work on, as LIKE
-- patterns, or NULL when no queue scope is in force (backoff._scope_in_force
-- is false: a superuser, or no grant exists and require_queue_grants is
-- off). The functions that read or settle jobs filter with
--   (v_scope IS NULL OR queue OPERATOR(pg_catalog.~~) ANY (v_scope))
-- and call this once per call, so that the rule "scoped only when a scope
-- is in force" is written here and nowhere else
-- (docs/adr/0058-queue-scope-fails-closed.md). Private.
--
-- PL/pgSQL like backoff._scope_in_force, for the same reason: cached plans,
-- no SQL-function executor per call.
CREATE OR REPLACE FUNCTION backoff._work_scope()
RETURNS text[]
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF backoff._scope_in_force() THEN
        RETURN backoff._queue_scope('work');
    END IF;
    RETURN NULL;
END
$$;

-- backoff._check_queue(queues, privilege): raise 42501
-- (insufficient_privilege) naming the first queue of p_queues the caller may
-- not act on with p_privilege (backoff._queue_scope; ADR 0038). Nothing
-- to check for an unscoped caller. Private; enqueue checks the queues it
-- inserts into ('produce'), claim its queue and the by-id functions the
-- queue of the job they touch ('work'). They call it as
--   IF backoff._scope_in_force() THEN PERFORM backoff._check_queue(...); END IF;
-- so that when nobody can be scoped the hot path pays that one check
-- (backoff._scope_in_force), not this function's look-ups.
CREATE OR REPLACE FUNCTION backoff._check_queue(p_queues text[], p_privilege text)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_scope text[] := backoff._queue_scope(p_privilege);
    v_queue text;
BEGIN
    IF v_scope IS NULL THEN
        RETURN;
    END IF;
    SELECT q INTO v_queue
    FROM pg_catalog.unnest(p_queues) AS q
    WHERE NOT q OPERATOR(pg_catalog.~~) ANY (v_scope)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied: role "%" may not % queue "%"',
            coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user),
            CASE p_privilege WHEN 'produce' THEN 'produce into' ELSE 'work on' END, v_queue
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'backoff.grant_queue(role, queue, ''' || p_privilege || ''') allows it';
    END IF;
END
$$;

-- backoff._grant_role(caller, role, privilege): the role of a queue grant,
-- checked with the privilege by one rule for grant_queue and revoke_queue:
-- p_role must be a role and p_privilege 'produce' or 'work'; otherwise
-- 22023 naming the value, prefixed with the caller's name. Private.
CREATE OR REPLACE FUNCTION backoff._grant_role(p_caller text, p_role text, p_privilege text)
RETURNS oid
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role oid;
BEGIN
    SELECT r.oid INTO v_role FROM pg_catalog.pg_roles AS r WHERE r.rolname = p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: unknown role "%"', p_caller, coalesce(p_role, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_privilege IS NULL OR p_privilege NOT IN ('produce', 'work') THEN
        RAISE EXCEPTION '%: privilege must be "produce" or "work", got "%"', p_caller, coalesce(p_privilege, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v_role;
END
$$;

-- backoff._check_job_scope(job id, queue): raise BK001 'job "N" not found',
-- exactly as for a job that does not exist, when the caller is scoped and
-- may not work on p_queue, the queue of job p_job_id. The by-id functions
-- (acquire, complete, fail, heartbeat, snooze and their fencing errors)
-- call it with the queue of the row they found, so that a scoped caller
-- cannot tell another queue's job from a missing id: no other code, no
-- queue name (docs/adr/0058-queue-scope-fails-closed.md). Raised after a
-- guarded UPDATE, the error undoes it. Called as
--   IF backoff._scope_in_force() THEN PERFORM backoff._check_job_scope(...); END IF;
-- Private.
CREATE OR REPLACE FUNCTION backoff._check_job_scope(p_job_id bigint, p_queue text)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_scope text[] := backoff._queue_scope('work');
BEGIN
    IF v_scope IS NOT NULL AND NOT p_queue OPERATOR(pg_catalog.~~) ANY (v_scope) THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
END
$$;

-- backoff._visible_queues(): the LIKE patterns of the queues whose jobs the
-- caller may read through the row-level security policy of backoff.jobs
-- (its 'work' scope), or NULL for every queue. SECURITY DEFINER because the
-- policy runs as the reading role, which may not read backoff.queue_grants;
-- private, executable by backoff_worker only
-- (docs/adr/0038-queue-scoped-privileges.md).
CREATE OR REPLACE FUNCTION backoff._visible_queues()
RETURNS text[]
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._queue_scope('work')
$$;

-- backoff._queue_has_jobs(queue): whether any job of the queue exists,
-- from the three partial indexes that between them hold every job (live:
-- jobs_claimable_idx, finished: jobs_finished_idx, running:
-- jobs_lease_idx), so that it stays one probe each at any table size.
-- Private; pause_queue and resume_queue use it to tell a queue from a typo.
CREATE OR REPLACE FUNCTION backoff._queue_has_jobs(p_queue text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying'))
        OR EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.completed_at IS NOT NULL)
        OR EXISTS (SELECT FROM backoff.jobs AS j WHERE j.queue = p_queue AND j.lease_until IS NOT NULL)
$$;

-- backoff._switch_queue_name(verb, queue, create): p_queue as pause_queue
-- and resume_queue (p_verb 'pause' or 'resume') take it, checked by one
-- rule: the name rule of enqueue (backoff._check_name), since a name no
-- job can have is no queue to act on and a paused lookalike must not be
-- made; and p_create must not be NULL (22023 naming the queue). Private.
CREATE OR REPLACE FUNCTION backoff._switch_queue_name(p_verb text, p_queue text, p_create boolean)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    IF p_create IS NULL THEN
        RAISE EXCEPTION 'cannot % queue "%": create must not be null', p_verb, p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN p_queue;
END
$$;

-- backoff.job(job id): one job as a row of backoff.jobs, or no row when
-- there is none or the caller may not work on its queue. The read that
-- applies the queue scope inside a definer function: a query on the table
-- goes through row-level security, which filters rows after the index
-- found them, and EXPLAIN ANALYZE counts the rows it removed, so there a
-- foreign job and a missing one differ. Here both are one primary-key
-- probe and the same empty answer (docs/adr/0058-queue-scope-fails-closed.md).
CREATE OR REPLACE FUNCTION backoff.job(p_job_id bigint)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_scope text[];
BEGIN
    v_scope := backoff._work_scope();
    RETURN QUERY
    SELECT j.* FROM backoff.jobs AS j
    WHERE j.id = p_job_id
      AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope));
END
$$;

COMMENT ON FUNCTION backoff.job(bigint) IS
'Job p_job_id as a row of backoff.jobs; no row when there is no such job or the caller is scoped by backoff.grant_queue (or has no grant while backoff.settings.require_queue_grants is on) and may not work on its queue: the two cannot be told apart (a query on backoff.jobs, filtered by row-level security, can tell them apart with EXPLAIN ANALYZE). The Go client''s Get reads here. Workers and admins.
Example:
SELECT id, queue, status, attempts FROM backoff.job(42);';

-- backoff.wait_for_jobs(queue, worker, ttl): register that p_worker waits
-- for jobs of p_queue until now() + p_ttl, so that backoff.enqueue notifies
-- channel backoff_jobs for this queue (docs/adr/0027). A worker writes it
-- only when a claim found the queue empty, never while busy. The
-- registration follows the database's clock, not p_now: it is about live
-- connections, not about the jobs' simulated time. Queue and worker are
-- names (backoff._check_name), and the caller must be allowed to work on
-- the queue: workers cannot read backoff.waiting_workers.
CREATE OR REPLACE FUNCTION backoff.wait_for_jobs(
    p_queue  text,
    p_worker text,
    p_ttl    interval DEFAULT interval '1 minute'
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_until timestamptz;
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_worker := backoff._check_name('worker', p_worker);
    -- Only a worker that may work on the queue may wait for it: another
    -- could end its registrations or make enqueue notify for it
    -- (docs/adr/0058-queue-scope-fails-closed.md). 42501 naming the queue.
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;
    IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'wait for jobs in queue "%": ttl must be positive and at most 1 day, got "%"', p_queue, coalesce(p_ttl::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_until := pg_catalog.now() + p_ttl;
    INSERT INTO backoff.waiting_workers AS w (queue, worker, expires_at)
    VALUES (p_queue, p_worker, v_until)
    ON CONFLICT (queue, worker) DO UPDATE SET expires_at = excluded.expires_at;
    -- Registrations of workers that died, while we are here.
    DELETE FROM backoff.waiting_workers AS w
    WHERE w.queue = p_queue AND w.expires_at < pg_catalog.now();
    RETURN v_until;
END
$$;

COMMENT ON FUNCTION backoff.wait_for_jobs(text, text, interval) IS
'Register that p_worker waits for jobs of p_queue until now() + p_ttl (1 minute by default, at most 1 day): while a registration of the queue is live, backoff.enqueue notifies channel backoff_jobs with the queue name when it adds a job due now. A worker calls it when a claim found the queue empty, then claims once more and LISTENs; it ends the registration with backoff.stop_waiting when busy again. Expired registrations of the queue are deleted. Returns the expiry.
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control characters, a ttl that is NULL, not positive or over 1 day; 42501 when the caller is scoped by backoff.grant_queue (or has no grant while backoff.settings.require_queue_grants is on) and may not work on the queue.
Example:
LISTEN backoff_jobs;
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'', interval ''30 seconds'');
SELECT count(*) FROM backoff.claim(''emails'', ''worker-1'', 10);  -- look once more, then wait for a notification';

-- backoff.stop_waiting(queue, worker): end p_worker's registration for
-- p_queue (backoff.wait_for_jobs), so enqueue stops notifying for it. The
-- same checks as wait_for_jobs: names, and the caller's 'work' scope.
CREATE OR REPLACE FUNCTION backoff.stop_waiting(
    p_queue  text,
    p_worker text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_worker := backoff._check_name('worker', p_worker);
    -- Only a worker that may work on the queue may wait for it: another
    -- could end its registrations or make enqueue notify for it
    -- (docs/adr/0058-queue-scope-fails-closed.md). 42501 naming the queue.
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;
    DELETE FROM backoff.waiting_workers AS w WHERE w.queue = p_queue AND w.worker = p_worker;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.stop_waiting(text, text) IS
'End p_worker''s registration for p_queue (see backoff.wait_for_jobs): enqueue no longer notifies on its behalf. A worker calls it when a claim comes back full (the queue is busy) and at shutdown. Returns whether a registration existed.
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control characters; 42501 when the caller is scoped by backoff.grant_queue (or has no grant while backoff.settings.require_queue_grants is on) and may not work on the queue.
Example:
SELECT backoff.wait_for_jobs(''emails'', ''worker-1'');
SELECT backoff.stop_waiting(''emails'', ''worker-1'');  -- true';

-- backoff._current_segment(): the live segment of backoff.jobs that takes
-- new jobs now (docs/adr/0061), the one rule for "where does a live job
-- go" and "where does a claim look": the DEFAULT of backoff.jobs.segment
-- (an INSERT that names no segment, as a user's own SQL, lands there), the
-- segment every enqueue names, the one claim takes from and the one
-- complete, complete_many, fail, heartbeat and snooze look in. Private;
-- EXECUTE for backoff_admin too, whose own INSERTs evaluate the default.
--
-- A constant, published: backoff.segments records which segment is
-- current, and backoff._publish_current_segment writes that number into
-- this function's body, in the same transaction as the switch (backoff.rotate)
-- and at install. Being IMMUTABLE, the call is folded into a constant when a
-- statement is planned, so a cached plan names the current segment's
-- partition only: the other segments are pruned before it runs, and it
-- neither locks them nor starts their result relations and indexes, which
-- pruning at executor start still does (about 85,000 instructions a claim).
-- Replacing the function invalidates every cached plan that called it, in
-- every session, so the next execution plans again with the new number: a
-- statement planned before a switch commits uses the old segment, as a
-- statement that read backoff.segments before it would.
CREATE OR REPLACE FUNCTION backoff._publish_current_segment(p_segment smallint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_segment IS NULL OR p_segment < 1 THEN
        RAISE EXCEPTION 'current segment must be 1 or more, got "%"', coalesce(p_segment::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE pg_catalog.format(
        'CREATE OR REPLACE FUNCTION backoff._current_segment() RETURNS smallint '
        'LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        pg_catalog.format('SELECT %s::smallint', p_segment));
END
$$;

SELECT backoff._publish_current_segment(s.segment) FROM backoff.segments AS s WHERE s.current;

-- backoff._move_to_current_segment(ids): move the live jobs (blocked ones
-- too) among p_ids
-- that are outside the current segment into it (docs/adr/0061); returns
-- how many it moved. Private.
--
-- complete, complete_many, fail, heartbeat and snooze look for a job in the
-- current segment only, a statement whose other segments are pruned when
-- it is planned, so that it locks and opens one segment's partition. A job
-- they do not find there may be elsewhere: claimed before a switch and not
-- moved yet (rotate skips rows a worker holds), or acquired where a hand
-- INSERT put it, segment 0 included. They call this and run their
-- statement again: one statement per call, not a second copy of each.
-- It waits for a row another transaction holds, as the caller would;
-- backoff.rotate, which waits for nobody, moves only rows it has locked
-- with FOR UPDATE SKIP LOCKED.
CREATE OR REPLACE FUNCTION backoff._move_to_current_segment(p_ids bigint[])
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
-- Planned once, generic: a custom plan of a statement on every segment is
-- planned again at each call and locks every index of every segment.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_moved bigint;
BEGIN
    WITH m AS (
        DELETE FROM backoff.jobs AS j
        WHERE j.id = ANY (p_ids)
          AND j.segment <> backoff._current_segment()
          AND j.status IN ('pending', 'running', 'retrying', 'blocked')
        RETURNING j.*
    )
    INSERT INTO backoff.jobs AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                   lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                   dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                   lease_expiries, schedule, schedule_slot, segment)
    OVERRIDING SYSTEM VALUE
    SELECT m.id, m.queue, m.payload, m.status, m.priority, m.attempts, m.max_attempts, m.policy, m.run_at,
           m.lease_until, m.locked_by, m.last_attempted_at, m.last_failed_at, m.last_error, m.errors,
           m.dead_letter_reason, m.dedupe_key, m.created_at, m.completed_at, m.uncounted_attempts,
           m.lease_expiries, m.schedule, m.schedule_slot, backoff._current_segment()
    FROM m;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END
$$;

-- backoff._take_dedupe_key(queue, dedupe key, job id): the unfinished job
-- that holds the key (held), or the key taken for job_id (p_job_id, else an
-- id drawn from the job sequence when the key is free). A partitioned backoff.jobs cannot hold a
-- unique index without its segment, so the keys of unfinished jobs live in
-- backoff.dedupe_keys, unique there (docs/adr/0061). A row whose job is no
-- longer unfinished (an admin's direct write to backoff.jobs) is taken over.
-- Private; enqueue and replay use it.
CREATE OR REPLACE FUNCTION backoff._take_dedupe_key(
    p_queue      text,
    p_dedupe_key text,
    p_job_id     bigint,
    OUT held     bigint,
    OUT job_id   bigint
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_holder bigint;
BEGIN
    FOR v_try IN 1..10 LOOP
        SELECT k.job_id INTO v_holder
        FROM backoff.dedupe_keys AS k
        WHERE k.queue = p_queue AND k.dedupe_key = p_dedupe_key;
        IF FOUND THEN
            IF v_holder = p_job_id
               OR EXISTS (SELECT FROM backoff.jobs AS j
                          WHERE j.id = v_holder AND j.status IN ('pending', 'running', 'retrying', 'blocked')) THEN
                held := CASE WHEN v_holder IS DISTINCT FROM p_job_id THEN v_holder END;
                job_id := CASE WHEN v_holder = p_job_id THEN p_job_id END;
                RETURN;
            END IF;
            job_id := coalesce(p_job_id, job_id, pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass));
            UPDATE backoff.dedupe_keys AS k
            SET job_id = _take_dedupe_key.job_id
            WHERE k.queue = p_queue AND k.dedupe_key = p_dedupe_key AND k.job_id = v_holder;
            IF FOUND THEN
                RETURN;
            END IF;
        ELSE
            job_id := coalesce(p_job_id, job_id, pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass));
            INSERT INTO backoff.dedupe_keys (queue, dedupe_key, job_id)
            VALUES (p_queue, p_dedupe_key, _take_dedupe_key.job_id)
            ON CONFLICT (queue, dedupe_key) DO NOTHING;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'enqueue in queue "%": dedupe key "%" kept changing hands', p_queue, p_dedupe_key
        USING ERRCODE = 'serialization_failure';
END
$$;

-- backoff.enqueue(queue, payload, run_at, max_attempts, priority, dedupe_key,
-- now, policy): insert a job and return its id. The job records p_policy,
-- else the policy of its queue at this moment
-- (docs/adr/0008-single-retry-decision.md). p_policy follows p_now, against
-- the p_now-last convention, so that positional calls written before it
-- existed keep their meaning (docs/design.md#functions: optional parameters at the end). A dedupe
-- key that matches an unfinished job of the same queue returns that job's
-- id and inserts nothing. A job due now wakes listeners of channel
-- 'backoff_jobs' (payload: the queue name) when a worker has registered
-- that it waits for the queue (backoff.wait_for_jobs); a busy system, whose
-- workers do not wait, takes no notify lock. PostgreSQL delivers identical
-- notifications of one transaction once, so a bulk enqueue sends one per
-- queue.
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queue        text,
    p_payload      jsonb DEFAULT '{}',
    p_run_at       timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL,
    p_priority     integer DEFAULT 0,
    p_dedupe_key   text DEFAULT NULL,
    p_now          timestamptz DEFAULT now(),
    p_policy       text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id      bigint;
    v_run_at  timestamptz;
    v_scoped  boolean;
    v_waiting boolean;
    v_held    bigint;
BEGIN
    p_now := backoff._now(p_now);
    v_run_at := coalesce(p_run_at, p_now);
    p_queue := backoff._check_name('queue', p_queue);
    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A bounded range (docs/adr/0059): room for any ordering an
    -- application needs, and no extreme a producer could use to stay
    -- ahead of every priority an operator may later give.
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got "%"', p_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_run_at < '0001-01-01 00:00:00+00' OR p_run_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at must be a finite time in years 1 to 9999, got "%"', p_run_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The payload's size (docs/adr/0059): the limit is read only for a
    -- payload over 1 KiB, the smallest limit the setting allows, or one
    -- that arrives compressed (read from a table); otherwise two calls and
    -- no query.
    IF pg_catalog.pg_column_size(p_payload) > 1024 OR pg_catalog.pg_column_compression(p_payload) IS NOT NULL THEN
        PERFORM backoff._check_payload(ARRAY[p_payload]);
    END IF;
    IF p_dedupe_key = '' THEN
        RAISE EXCEPTION 'dedupe key must be NULL or non-empty, got ""'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_dedupe_key IS NOT NULL THEN
        p_dedupe_key := backoff._check_name('dedupe key', p_dedupe_key);
    END IF;
    IF p_policy IS NOT NULL THEN
        p_policy := backoff._check_name('policy', p_policy);
        IF NOT EXISTS (SELECT 1 FROM backoff.policies AS p WHERE p.name = p_policy) THEN
            RAISE EXCEPTION 'unknown policy "%"', p_policy
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF p_dedupe_key IS NULL THEN
        -- The common case in one statement (one executor start, profile in
        -- docs/benchmarks.md): the job, and two probes in its RETURNING: is
        -- any caller scoped by queue, and does a worker wait for this
        -- queue (then a job due now notifies it at commit, docs/adr/0027).
        -- Into the current segment (docs/adr/0061).
        INSERT INTO backoff.jobs (queue, payload, priority, max_attempts, policy, run_at, created_at, segment)
        SELECT p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts, g.name, v_run_at, p_now,
               backoff._current_segment()
        FROM backoff._governing_policy(p_policy, p_queue) AS g
        RETURNING id,
                  backoff._scope_in_force(),
                  EXISTS (SELECT FROM backoff.waiting_workers AS w
                          WHERE w.queue = p_queue AND w.expires_at > pg_catalog.now())
        INTO v_id, v_scoped, v_waiting;
        IF v_scoped THEN
            -- 42501 for a caller that may not produce into p_queue: the
            -- error undoes the INSERT.
            PERFORM backoff._check_queue(ARRAY[p_queue], 'produce');
        END IF;
        IF v_waiting AND v_run_at <= p_now THEN
            PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
        END IF;
        RETURN v_id;
    END IF;

    -- With a dedupe key the grants are checked first: a caller that may not
    -- produce into p_queue must not learn the id of its job with that key.
    SELECT backoff._scope_in_force(),
           v_run_at <= p_now AND EXISTS (SELECT FROM backoff.waiting_workers AS w
                                         WHERE w.queue = p_queue AND w.expires_at > pg_catalog.now())
    INTO v_scoped, v_waiting;
    IF v_scoped THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'produce');
    END IF;
    -- The key is held in backoff.dedupe_keys (docs/adr/0061): take it for
    -- a new id, or return the unfinished job that holds it. The id is drawn
    -- either way, as the INSERT ... ON CONFLICT of one table did, so that
    -- ids follow as they always have.
    v_id := pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass);
    v_held := (SELECT k.held FROM backoff._take_dedupe_key(p_queue, p_dedupe_key, v_id) AS k);
    IF v_held IS NOT NULL THEN
        RETURN v_held;
    END IF;
    INSERT INTO backoff.jobs (id, queue, payload, priority, max_attempts, policy, run_at, created_at, dedupe_key, segment)
    OVERRIDING SYSTEM VALUE
    SELECT v_id, p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts, g.name, v_run_at, p_now,
           p_dedupe_key, backoff._current_segment()
    FROM backoff._governing_policy(p_policy, p_queue) AS g;
    IF v_waiting THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
    END IF;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text, jsonb, timestamptz, integer, integer, text, timestamptz, text) IS
'Insert a job into p_queue and return its id. p_payload (jsonb, NULL = {}; at most backoff.settings.max_payload_bytes, 1 MiB by default, measured as the uncompressed jsonb), p_run_at (first run; NULL = p_now), p_max_attempts (NULL = the policy''s), p_priority (higher first, -32768 to 32767; NULL = 0), p_dedupe_key (while a job of this queue with that key is pending, running or retrying, return its id and insert nothing), p_now (created_at), p_policy (the policy of this job; NULL = its queue''s, from backoff.queues, else ''default''; it comes after p_now so that positional calls keep working, so pass it by name). The job records that policy: remapping the queue later does not change it. A deduplicated call returns the existing job unchanged, whatever p_policy says. A job due now notifies channel backoff_jobs with the queue name as payload, once per transaction and queue, when a worker waits for the queue (backoff.wait_for_jobs).
Errors: 22023 for a queue, dedupe key or policy that is not 1 to 128 bytes without control or format characters, max_attempts < 1, a priority outside -32768 to 32767, a payload over max_payload_bytes (naming its size and the limit), an empty dedupe key, a run_at outside years 1 to 9999, a p_policy that names no row of backoff.policies, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock. 42501 when the caller is scoped by backoff.grant_queue and may not produce into p_queue.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT backoff.enqueue(''reports'', p_policy => ''conservative'');
SELECT id, queue, policy FROM backoff.jobs ORDER BY id;';

-- backoff.enqueue(queues[], payloads[], run_ats[], max_attempts[],
-- priorities[], dedupe_keys[], now, policies[]): the bulk form, element i of every
-- array describing job i; returns the ids in input order. It has exactly
-- the single-job form's semantics, but a batch without dedupe keys is
-- inserted by ONE set-based INSERT instead of one INSERT per job (about 5x
-- fewer server cycles per job; docs/adr/0016-set-based-bulk-enqueue.md). A
-- batch with a dedupe key goes through the single-job form element by
-- element, which handles the key's conflicts and races. The ids are drawn
-- from the identity sequence before the INSERT so that each one is tied to
-- its element whatever order the rows are inserted in. The checks work on
-- whole arrays and the governing policy is looked up once per distinct
-- (queue, policy), so the cost per job stays close to a hand-written
-- multi-row INSERT's (docs/benchmarks.md).
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queues       text[],
    p_payloads     jsonb[],
    p_run_ats      timestamptz[],
    p_max_attempts integer[],
    p_priorities   integer[],
    p_dedupe_keys  text[],
    p_now          timestamptz DEFAULT now(),
    p_policies     text[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Its statements read only whole arrays and the small policy, queue and
-- waiting-worker tables: one generic plan each, never re-planned per call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n    integer := coalesce(cardinality(p_queues), 0);
    v_due  text[]  := p_queues;
    v_dims integer := greatest(array_ndims(p_queues), array_ndims(p_payloads), array_ndims(p_run_ats),
                               array_ndims(p_max_attempts), array_ndims(p_priorities), array_ndims(p_dedupe_keys),
                               array_ndims(p_policies));
BEGIN
    p_now := backoff._now(p_now);
    IF p_queues IS NULL
       OR coalesce(cardinality(p_payloads), v_n) <> v_n OR coalesce(cardinality(p_run_ats), v_n) <> v_n
       OR coalesce(cardinality(p_max_attempts), v_n) <> v_n OR coalesce(cardinality(p_priorities), v_n) <> v_n
       OR coalesce(cardinality(p_dedupe_keys), v_n) <> v_n OR coalesce(cardinality(p_policies), v_n) <> v_n THEN
        RAISE EXCEPTION 'enqueue: the arrays must not be null (queues) and must have the same length, got "%" queues', coalesce(v_n::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A job per element of one dimension (the array functions below refuse
    -- more with 0A000, and a flattened matrix is no batch anyone meant).
    IF v_dims > 1 THEN
        RAISE EXCEPTION 'enqueue: the arrays must have one dimension, got one with "%"', v_dims
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The checks below work on whole arrays (ANY, array_remove,
    -- array_to_string) rather than scanning unnest once per check, and an
    -- array of NULLs, which a client may send for a field it does not set,
    -- costs about what a NULL array costs (profile in docs/benchmarks.md).
    -- Payload sizes, once for the batch (docs/adr/0059): one scan of the
    -- sizes, and the limit read only when a payload is over 1 KiB, the
    -- smallest limit the setting allows. An array holds its elements
    -- uncompressed, so their size is exact.
    IF EXISTS (SELECT FROM unnest(p_payloads) AS p WHERE pg_catalog.pg_column_size(p) > 1024) THEN
        PERFORM backoff._check_payload(p_payloads);
    END IF;
    IF pg_catalog.cardinality(pg_catalog.array_remove(p_dedupe_keys, NULL)) > 0 THEN
        RETURN QUERY
        SELECT backoff.enqueue(t.queue, t.payload, t.run_at, t.max_attempts, t.priority, t.dedupe_key, p_now, t.policy)
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, dedupe_key, policy, ord)
        ORDER BY t.ord;
        RETURN;
    END IF;
    -- Names: a NULL, a control or format character anywhere in the batch
    -- (one match over the names joined), or a length outside 1 to 128
    -- bytes; the first bad one is reported by the single-name check.
    IF pg_catalog.array_position(p_queues, NULL) IS NOT NULL
       OR pg_catalog.array_to_string(p_queues, '') ~ backoff._bad_name_chars()
       OR EXISTS (SELECT FROM unnest(p_queues) AS q WHERE octet_length(q) NOT BETWEEN 1 AND 128) THEN
        PERFORM backoff._check_name('queue', q)
        FROM unnest(p_queues) AS q
        WHERE q IS NULL OR octet_length(q) NOT BETWEEN 1 AND 128 OR q ~ backoff._bad_name_chars();
    END IF;
    IF 1 > ANY (p_max_attempts) THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"',
            (SELECT min(m) FROM unnest(p_max_attempts) AS m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF -32768 > ANY (p_priorities) OR 32767 < ANY (p_priorities) THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got "%"',
            (SELECT p FROM unnest(p_priorities) AS p WHERE p NOT BETWEEN -32768 AND 32767 LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF '0001-01-01 00:00:00+00' > ANY (p_run_ats) OR '10000-01-01 00:00:00+00' <= ANY (p_run_ats) THEN
        RAISE EXCEPTION 'run_at must be a finite time in years 1 to 9999, got "%"',
            (SELECT r FROM unnest(p_run_ats) AS r WHERE r < '0001-01-01 00:00:00+00' OR r >= '10000-01-01 00:00:00+00' LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(pg_catalog.array_remove(p_policies, NULL)) > 0 THEN
        PERFORM backoff._check_name('policy', n) FROM unnest(p_policies) AS n WHERE n IS NOT NULL;
        IF EXISTS (SELECT FROM unnest(p_policies) AS n
                   WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n)) THEN
            RAISE EXCEPTION 'unknown policy "%"',
                (SELECT n FROM unnest(p_policies) AS n
                 WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n) LIMIT 1)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(p_queues, 'produce');
    END IF;

    -- The governing policy is looked up once per distinct (queue, policy)
    -- of the batch, not once per job. '' stands for "no policy of its own"
    -- in the join key ('' is not a valid policy name), so the join hashes.
    RETURN QUERY
    WITH src AS MATERIALIZED (
        SELECT t.ord, pg_catalog.nextval('backoff.jobs_id_seq'::regclass) AS id,
               t.queue, t.payload, coalesce(t.run_at, p_now) AS run_at, t.max_attempts, t.priority,
               coalesce(t.policy, '') AS policy
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, policy, ord)
    ), governing AS MATERIALIZED (
        SELECT d.queue, d.policy, g.name
        FROM (SELECT DISTINCT s.queue, s.policy FROM src AS s) AS d
        CROSS JOIN LATERAL backoff._governing_policy(nullif(d.policy, ''), d.queue) AS g
    ), ins AS (
        INSERT INTO backoff.jobs (id, queue, payload, priority, max_attempts, policy, run_at, created_at, segment)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.queue, coalesce(s.payload, '{}'), coalesce(s.priority, 0), s.max_attempts,
               g.name, s.run_at, p_now, backoff._current_segment()
        FROM src AS s
        JOIN governing AS g ON g.queue = s.queue AND g.policy = s.policy
    )
    SELECT s.id FROM src AS s ORDER BY s.ord;

    -- Wake the workers waiting for a queue with a job due now: a scan of
    -- the few waiting workers, not of the batch.
    IF p_now < ANY (p_run_ats) THEN
        v_due := ARRAY(SELECT t.queue FROM unnest(p_queues, p_run_ats) AS t(queue, run_at)
                       WHERE coalesce(t.run_at, p_now) <= p_now);
    END IF;
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_due) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text[], jsonb[], timestamptz[], integer[], integer[], text[], timestamptz, text[]) IS
'Bulk enqueue: insert one job per element of p_queues (element i of p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys and p_policies goes with it; every array but p_policies is required, a NULL array means all NULL; a call with only NULLs after the queues needs a cast or named arguments to pick this form) and return the ids in input order. Each job gets exactly what backoff.enqueue(p_queue, ...) would give it, dedupe included; a batch without dedupe keys is one set-based INSERT. Atomic: on error no job is added. Notifies channel backoff_jobs once per queue with a job due now and a waiting worker (backoff.wait_for_jobs).
Errors: 22023 for a NULL p_queues, arrays of different lengths or of more than one dimension, a queue, dedupe key or policy that is not 1 to 128 bytes without control or format characters, a max_attempts < 1, a priority outside -32768 to 32767, a payload over max_payload_bytes (naming its place in the batch, its size and the limit), an empty dedupe key, a run_at outside years 1 to 9999, a policy that names no row of backoff.policies, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock. 42501 when the caller is scoped by backoff.grant_queue and may not produce into one of the queues.
Example:
SELECT * FROM backoff.enqueue(ARRAY[''emails'', ''emails'', ''sms''], ARRAY[''{"to": "a"}'', ''{"to": "b"}'', NULL]::jsonb[],
                              NULL, NULL, ARRAY[0, 5, 0], NULL);';

-- backoff.enqueue_graph(jobs, now): enqueue a workflow, jobs that depend on
-- one another, in one call and one transaction (docs/adr/0087). Each
-- element of p_jobs is a job as backoff.enqueue takes it, with a local
-- "ref" and "depends_on": refs of the graph, or ids of existing jobs, each
-- with the edge's policy for a parent that ends without completing. The
-- graph is checked whole before anything is inserted (unknown keys and
-- references, self-edges, duplicate edges, cycles), then every job goes
-- through backoff.enqueue, so that names, limits, policies, dedupe keys,
-- queue scopes and wake-ups are exactly those of a single enqueue; the
-- jobs with an unfinished parent are then 'blocked', outside the claim
-- index, with a counter of their open edges.
CREATE OR REPLACE FUNCTION backoff.enqueue_graph(
    p_jobs jsonb,
    p_now  timestamptz DEFAULT now()
)
RETURNS TABLE (ref text, job_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n        integer;
    v_refs     text[];
    v_ids      bigint[];
    v_new      boolean[];
    v_bad      text;
    v_left     integer[];
    v_ready    integer[];
    v_scope    text[];
    v_tries    integer := 0;
    v_missing  bigint[];
    v_cancel   bigint[];
    v_cause    bigint[];
    v_why      text[];
    v_blocked  bigint[];
    e          jsonb;
    -- The edges: child and parent places in the graph, or the parent's id,
    -- and the policy; the existing parents' ids and statuses.
    v_ec       integer[];
    v_ep       integer[];
    v_eid      bigint[];
    v_epol     text[];
    v_pid      bigint[] := '{}';
    v_pstatus  text[]   := '{}';
    v_all      bigint[];
BEGIN
    p_now := backoff._now(p_now);
    IF p_jobs IS NULL OR pg_catalog.jsonb_typeof(p_jobs) <> 'array' OR pg_catalog.jsonb_array_length(p_jobs) = 0 THEN
        RAISE EXCEPTION 'enqueue_graph: jobs must be a non-empty JSON array, got "%"', coalesce(pg_catalog.left(p_jobs::text, 100), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_n := pg_catalog.jsonb_array_length(p_jobs);
    -- Bounded input (docs/adr/0039): a graph is one transaction's work.
    IF v_n > 10000 THEN
        RAISE EXCEPTION 'enqueue_graph: at most 10000 jobs in one graph, got "%"', v_n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The shape of each job, and of each of its edges.
    FOR i IN 0..v_n - 1 LOOP
        e := p_jobs -> i;
        IF pg_catalog.jsonb_typeof(e) <> 'object' THEN
            RAISE EXCEPTION 'enqueue_graph: job % must be a JSON object, got "%"', i + 1, pg_catalog.left(e::text, 100)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_bad := (SELECT k FROM pg_catalog.jsonb_object_keys(e) AS k
                  WHERE k NOT IN ('ref', 'queue', 'payload', 'run_at', 'max_attempts', 'priority', 'dedupe_key', 'policy', 'depends_on')
                  LIMIT 1);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'enqueue_graph: job % has an unknown key "%"', i + 1, v_bad
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'keys: ref, queue, payload, run_at, max_attempts, priority, dedupe_key, policy, depends_on';
        END IF;
        IF pg_catalog.jsonb_typeof(e -> 'ref') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'enqueue_graph: job % needs a "ref" string, got "%"', i + 1, coalesce((e -> 'ref')::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM backoff._check_name('ref', e ->> 'ref');
        IF e ? 'depends_on' AND pg_catalog.jsonb_typeof(e -> 'depends_on') NOT IN ('array', 'null') THEN
            RAISE EXCEPTION 'enqueue_graph: depends_on of "%" must be an array, got "%"', e ->> 'ref', pg_catalog.left((e -> 'depends_on')::text, 100)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    v_refs := ARRAY(SELECT t.j ->> 'ref' FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS t(j, ord) ORDER BY t.ord);
    v_bad := (SELECT r FROM unnest(v_refs) AS r GROUP BY r HAVING count(*) > 1 LIMIT 1);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: ref "%" names more than one job', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The edges, one row each: the child's place, its parent's place in the
    -- graph or an existing job's id, and the policy.
    -- (Arrays, not a temporary table: the function needs no TEMP
    -- privilege and leaves no catalog rows behind.)
    SELECT coalesce(array_agg(x.child ORDER BY x.child, x.n), '{}'), coalesce(array_agg(x.parent ORDER BY x.child, x.n), '{}'),
           coalesce(array_agg(x.parent_id ORDER BY x.child, x.n), '{}'), coalesce(array_agg(x.on_failure ORDER BY x.child, x.n), '{}')
    INTO v_ec, v_ep, v_eid, v_epol
    FROM (
    SELECT j.ord::integer AS child, d.n,
           CASE WHEN pg_catalog.jsonb_typeof(d.v) = 'string' THEN pg_catalog.array_position(v_refs, d.v #>> '{}')
                WHEN d.v ? 'ref' THEN pg_catalog.array_position(v_refs, d.v ->> 'ref') END AS parent,
           CASE WHEN pg_catalog.jsonb_typeof(d.v) = 'number' THEN (d.v #>> '{}')::bigint
                WHEN d.v ? 'job' THEN (d.v ->> 'job')::bigint END AS parent_id,
           coalesce(CASE WHEN pg_catalog.jsonb_typeof(d.v) = 'object' THEN d.v ->> 'on_failure' END, 'cancel') AS on_failure
    FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS j(j, ord)
    CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(coalesce(nullif(j.j -> 'depends_on', 'null'), '[]')) WITH ORDINALITY AS d(v, n)
    ) AS x;
    -- An edge that names no job of the graph and no id, or a policy that
    -- does not exist, named with its child.
    SELECT pg_catalog.format('depends_on of "%s" names %s', v_refs[g.child],
                             CASE WHEN g.on_failure NOT IN ('cancel', 'run', 'wait')
                                  THEN pg_catalog.format('an unknown on_failure "%s" (cancel, run or wait)', g.on_failure)
                                  ELSE 'an unknown ref' END)
    INTO v_bad
    FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
    WHERE (g.parent IS NULL AND g.parent_id IS NULL) OR g.on_failure NOT IN ('cancel', 'run', 'wait')
    ORDER BY g.child
    LIMIT 1;
    IF v_bad LIKE '%an unknown ref' THEN
        -- Name the reference itself when it is one.
        v_bad := coalesce((
        SELECT pg_catalog.format('depends_on of "%s" names an unknown ref "%s"', v_refs[j.ord], coalesce(d.v ->> 'ref', d.v #>> '{}'))
        FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS j(j, ord)
        CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(coalesce(nullif(j.j -> 'depends_on', 'null'), '[]')) AS d(v)
        WHERE (pg_catalog.jsonb_typeof(d.v) = 'string' AND NOT (d.v #>> '{}') = ANY (v_refs))
           OR (pg_catalog.jsonb_typeof(d.v) = 'object' AND d.v ? 'ref' AND NOT (d.v ->> 'ref') = ANY (v_refs))
        ORDER BY j.ord
        LIMIT 1), pg_catalog.format('%s without a ref or a job id', v_bad));
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: %', coalesce(v_bad, (SELECT pg_catalog.format('depends_on of "%s" has an edge without a ref or a job id, or with an unknown on_failure', v_refs[g.child])
                                                            FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                                                            WHERE (g.parent IS NULL AND g.parent_id IS NULL) OR g.on_failure NOT IN ('cancel', 'run', 'wait')
                                                            ORDER BY g.child LIMIT 1))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_bad := (SELECT v_refs[g.child] FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure) WHERE g.parent = g.child ORDER BY g.child LIMIT 1);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: job "%" depends on itself', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_bad := (SELECT pg_catalog.format('"%s" on "%s"', v_refs[g.child], coalesce(v_refs[g.parent], g.parent_id::text))
              FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
              GROUP BY g.child, g.parent, g.parent_id HAVING count(*) > 1 LIMIT 1);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: the dependency % is given twice', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Cycles: peel off, round by round, the jobs none of whose parents in
    -- the graph is left (a hash join a round, as many rounds as the
    -- graph is deep); what cannot be peeled is on a cycle or after one.
    v_left := ARRAY(SELECT g FROM pg_catalog.generate_series(1, v_n) AS g);
    LOOP
        v_ready := ARRAY(SELECT l.o FROM unnest(v_left) AS l(o)
                         EXCEPT
                         SELECT g.child FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                         JOIN unnest(v_left) AS l(o) ON l.o = g.parent);
        EXIT WHEN cardinality(v_ready) = cardinality(v_left);
        IF cardinality(v_ready) = 0 THEN
            RAISE EXCEPTION 'enqueue_graph: the dependencies have a cycle through %',
                (SELECT pg_catalog.string_agg(pg_catalog.format('"%s"', v_refs[l.o]), ', ' ORDER BY l.o)
                 FROM (SELECT o FROM unnest(v_left) AS o ORDER BY o LIMIT 10) AS l(o))
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_left := ARRAY(SELECT o FROM unnest(v_left) AS o EXCEPT SELECT o FROM unnest(v_ready) AS o);
    END LOOP;

    -- The jobs, each through backoff.enqueue. A job whose dedupe key an
    -- unfinished job holds is that job, unchanged: enqueue returns its id,
    -- not the id it drew (currval, this session's last), and its own
    -- depends_on is not applied.
    v_ids := '{}';
    v_new := '{}';
    FOR i IN 0..v_n - 1 LOOP
        e := p_jobs -> i;
        v_ids := v_ids || backoff.enqueue(
            e ->> 'queue', nullif(e -> 'payload', 'null'), (e ->> 'run_at')::timestamptz, (e ->> 'max_attempts')::integer,
            coalesce((e ->> 'priority')::integer, 0), e ->> 'dedupe_key', p_now, e ->> 'policy');
        v_new := v_new || (v_ids[i + 1] = pg_catalog.currval('backoff.jobs_id_seq'::pg_catalog.regclass));
    END LOOP;
    -- A deduplicated job's edges go, and an edge to one names its id.
    SELECT coalesce(array_agg(g.child), '{}'), coalesce(array_agg(g.parent), '{}'),
           coalesce(array_agg(coalesce(g.parent_id, CASE WHEN NOT v_new[g.parent] THEN v_ids[g.parent] END)), '{}'),
           coalesce(array_agg(g.on_failure), '{}')
    INTO v_ec, v_ep, v_eid, v_epol
    FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
    WHERE v_new[g.child];
    -- Parents that exist already (an id, or a deduplicated job of the
    -- graph): their status says what the edge is now. None may finish
    -- unseen before these edges commit, or its settlement would miss them:
    -- a live parent's row is updated (a column nothing indexes, so the
    -- update stays off the indexes), which a finishing call waits for and
    -- then, at READ COMMITTED, settles with a snapshot that sees the edges,
    -- or, at REPEATABLE READ and SERIALIZABLE, fails with a serialization
    -- error and retries; a lock alone would let that snapshot miss them. A
    -- finished parent is locked FOR KEY SHARE against prune. A row that a
    -- call finished or rotate moved while this waited is read again.
    v_scope := backoff._queue_scope('produce');
    IF NOT backoff._scope_in_force() THEN
        v_scope := NULL;
    END IF;
    LOOP
        v_tries := v_tries + 1;
        v_all := ARRAY(SELECT DISTINCT g.parent_id FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                       WHERE g.parent_id IS NOT NULL ORDER BY 1);
        WITH u AS (
            UPDATE backoff.jobs AS j SET locked_by = j.locked_by
            WHERE j.id = ANY (v_all)
              AND j.status IN ('pending', 'running', 'retrying', 'blocked')
              AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
            RETURNING j.id, j.status
        )
        SELECT coalesce(array_agg(u.id), '{}'), coalesce(array_agg(u.status), '{}') INTO v_pid, v_pstatus FROM u;
        SELECT v_pid || coalesce(array_agg(l.id), '{}'), v_pstatus || coalesce(array_agg(l.status), '{}') INTO v_pid, v_pstatus
        FROM (SELECT j.id, j.status FROM backoff.jobs AS j
              WHERE j.id = ANY (v_all)
                AND NOT j.id = ANY (v_pid)
                AND j.status IN ('completed', 'dead_lettered', 'cancelled')
                AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
              ORDER BY j.id
              FOR KEY SHARE OF j) AS l;
        v_missing := ARRAY(SELECT DISTINCT g.parent_id FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                           WHERE g.parent_id IS NOT NULL
                             AND NOT EXISTS (SELECT FROM unnest(v_pid, v_pstatus) AS p(id, status) WHERE p.id = g.parent_id)
                           ORDER BY 1);
        EXIT WHEN cardinality(v_missing) = 0 OR v_tries = 3;
    END LOOP;
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'enqueue_graph: depends_on of "%" names job "%", which does not exist',
            (SELECT v_refs[g.child] FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure) WHERE g.parent_id = v_missing[1] ORDER BY g.child LIMIT 1),
            v_missing[1]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The edges and the counters. An edge to a completed parent is
    -- satisfied now; to one that failed, its policy applies now.
    INSERT INTO backoff.job_dependencies (child_id, parent_id, on_failure, state)
    SELECT v_ids[g.child], coalesce(g.parent_id, v_ids[g.parent]), g.on_failure,
           CASE WHEN p.status IS NULL OR p.status NOT IN ('completed', 'dead_lettered', 'cancelled') THEN 'open'
                WHEN p.status = 'completed' OR g.on_failure = 'run' THEN 'satisfied'
                WHEN g.on_failure = 'wait' THEN 'waiting'
                ELSE 'failed' END
    FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
    LEFT JOIN unnest(v_pid, v_pstatus) AS p(id, status) ON p.id = g.parent_id;
    WITH c AS (
        SELECT d.child_id,
               count(*) FILTER (WHERE d.state = 'open') AS open,
               count(*) FILTER (WHERE d.state = 'waiting') AS waiting,
               count(*) FILTER (WHERE d.state = 'failed') AS failed
        FROM backoff.job_dependencies AS d
        WHERE d.child_id = ANY (ARRAY(SELECT DISTINCT v_ids[g.child] FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)))
        GROUP BY d.child_id
    ), b AS (
        INSERT INTO backoff.job_blockers AS k (job_id, remaining, waiting)
        SELECT c.child_id, c.open, c.waiting FROM c WHERE c.open + c.waiting + c.failed > 0
        RETURNING k.job_id
    )
    SELECT array_agg(b.job_id) INTO v_blocked FROM b;
    IF v_blocked IS NOT NULL THEN
        UPDATE backoff.jobs AS j SET status = 'blocked'
        WHERE j.id = ANY (v_blocked) AND j.status = 'pending';
    END IF;
    -- A child of a parent that failed already, under 'cancel', is
    -- cancelled now, and its children in the graph with it.
    SELECT array_agg(d.child_id ORDER BY d.child_id), array_agg(d.parent_id ORDER BY d.child_id),
           array_agg(p.status ORDER BY d.child_id)
    INTO v_cancel, v_cause, v_why
    FROM (SELECT DISTINCT ON (d.child_id) d.child_id, d.parent_id
          FROM backoff.job_dependencies AS d
          WHERE d.child_id = ANY (v_blocked) AND d.state = 'failed'
          ORDER BY d.child_id, d.parent_id) AS d
    JOIN unnest(v_pid, v_pstatus) AS p(id, status) ON p.id = d.parent_id;
    IF v_cancel IS NOT NULL THEN
        FOR i IN 1..cardinality(v_cancel) LOOP
            IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = v_cancel[i] AND j.status = 'blocked') THEN
                PERFORM backoff.cancel(v_cancel[i], pg_catalog.format('parent job "%s" was %s', v_cause[i], v_why[i]), p_now);
            END IF;
        END LOOP;
    END IF;

    RETURN QUERY SELECT t.r, t.id FROM unnest(v_refs, v_ids) AS t(r, id);
END
$$;

COMMENT ON FUNCTION backoff.enqueue_graph(jsonb, timestamptz) IS
'Enqueue a workflow in one call and one transaction, and return each job''s ref and id, in input order. p_jobs is a JSON array of jobs, each an object with "ref" (a name for the job within this graph, 1 to 128 bytes, unique), "queue", and optionally "payload", "run_at", "max_attempts", "priority", "dedupe_key", "policy" (as backoff.enqueue takes them; any queue of the caller''s) and "depends_on": an array of parents, each a ref of this graph ("extract"), an existing job''s id (42), or an object {"ref": "extract"} or {"job": 42} with "on_failure": ''cancel'' (the default), ''run'' or ''wait''. A job with a parent that has not completed is blocked: never claimed, until its last parent completes, in that parent''s transaction. A parent that ends without completing (dead_lettered, cancelled) applies each edge''s on_failure: ''cancel'' cancels the child (its last_error names the parent) and, in turn, the child''s own ''cancel'' children; ''run'' counts the edge as satisfied; ''wait'' keeps the child blocked until backoff.unblock, or a replay of the parent (then the child waits for the new run). An edge to a job that has completed is satisfied already, one to a job that failed applies its policy now. A job whose dedupe key an unfinished job holds is that job, unchanged (its depends_on is not applied). Each job is enqueued as backoff.enqueue would (limits, policies, scopes, wake-ups); atomic: on error nothing is added.
Errors: 22023 for p_jobs that is not a non-empty array of objects, more than 10000 jobs, an unknown key, a missing, invalid or repeated ref, a depends_on that is not an array, an unknown ref or on_failure (naming them), a job that depends on itself, an edge given twice, a cycle (naming the refs on or after it), a job id that does not exist (or, for a scoped caller, whose queue it may not produce into), and every error of backoff.enqueue for a job''s fields; a field of the wrong JSON type raises its cast''s error (22P02, 22007). 42501 when the caller is scoped and may not produce into a job''s queue.
Example:
SELECT * FROM backoff.enqueue_graph(''[
  {"ref": "extract", "queue": "etl", "payload": {"table": "orders"}},
  {"ref": "load-eu", "queue": "etl", "depends_on": ["extract"]},
  {"ref": "load-us", "queue": "etl", "depends_on": ["extract"]},
  {"ref": "report", "queue": "reports", "depends_on": ["load-eu", {"ref": "load-us", "on_failure": "run"}]}
]'');
SELECT id, status FROM backoff.jobs ORDER BY id;';

-- backoff._queue_burst(rate, burst): the size of a rate-limited queue's
-- token bucket (docs/adr/0045): its burst, else greatest(1, ceil(rate)),
-- at most 2147483647, an integer. Private; the one definition that claim
-- (backoff._claim_controlled), backoff.queue_state and backoff.prune read
-- the bucket through, each splitting it into least(16, burst) slots. One
-- expression, so it is inlined.
CREATE OR REPLACE FUNCTION backoff._queue_burst(p_rate double precision, p_burst integer)
RETURNS integer
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_burst, least(greatest(1, pg_catalog.ceil(p_rate)), 2147483647)::integer)
$$;

-- backoff._claim_controlled(queue, worker, limit, lease, now, queue row):
-- claim for a queue under controls (docs/adr/0045): a rate, or a breaker
-- that is open or half open. Private; backoff.claim calls it, with its
-- checked arguments and the queue's row, only when its fast statement
-- claimed nothing for such a queue. It never waits for another claimer:
-- a state row or bucket slot another transaction holds is skipped.
--   breaker open (now < half_open_at)  -> nothing.
--   breaker half open                  -> the state row is locked (only
--       here) with SKIP LOCKED: held by another transaction, nothing now;
--       else concurrent claimers hand out exactly probes_left jobs in
--       total: at most that many, and probes_left goes down by the number
--       claimed. The lock is held to the end of the claim's transaction.
--       When every probe is out and none of them is running any more
--       (reaped, snoozed, cancelled, or failed as not retryable: no result
--       about the downstream), a new set is handed out, so a probe whose
--       worker died cannot keep the queue shut. A probe's
--       failure that fail logged because this row was busy reopens it.
--   rate                               -> the bucket is n = least(16,
--       burst) slot rows, each with its share of the burst and of the rate
--       (the shares add up to burst and rate). Free slots are locked
--       fullest first (FOR UPDATE SKIP LOCKED) until their whole tokens
--       cover the limit, each refilled lazily from p_now; at most those
--       whole tokens are claimed, and the slots lose only the tokens of
--       the jobs actually claimed, fullest first (the rest are never taken
--       off). One row update per slot taken from, none when nothing was
--       claimed. A new bucket's slots are created full by one claimer
--       (elected with a try-lock, so no claimer waits).
-- Locks are taken in one order (breaker, then slots), all without
-- waiting; claim never waits for a job row (SKIP LOCKED).
CREATE OR REPLACE FUNCTION backoff._claim_controlled(
    p_queue  text,
    p_worker text,
    p_limit  integer,
    p_lease  interval,
    p_now    timestamptz,
    p_q      backoff.queues
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_allow    integer := p_limit;
    v_state    backoff.queue_breakers;
    v_probes   integer;
    v_failed   timestamptz;
    v_burst    integer;
    v_nslots   integer;
    v_pass     integer;
    v_cur      refcursor;
    v_slot     smallint;
    v_avail    double precision;
    v_sum      double precision;
    v_slots    smallint[];
    v_avails   double precision[];
    v_left     double precision;
    v_take     double precision;
    v_wslots   smallint[];
    v_wtokens  double precision[];
    v_count    integer;
    v_jobs     backoff.jobs[];
    v_ids      bigint[];
BEGIN
    IF p_q.breaker_failures IS NOT NULL THEN
        SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        IF v_state.opened_at IS NOT NULL THEN
            IF p_now < v_state.half_open_at THEN
                RETURN;  -- open
            END IF;
            -- Half open: count the probes under the row's lock, on its
            -- latest version (a fail may have reopened it, a complete closed
            -- it). A row another transaction holds (a claim handing out
            -- probes, a fail reopening, a complete closing) gives nothing
            -- now rather than a wait.
            SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue
            FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                RETURN;
            END IF;
            IF v_state.opened_at IS NOT NULL THEN
                IF p_now < v_state.half_open_at THEN
                    RETURN;
                END IF;
                -- A probe's fail that found this row locked logged its
                -- failure instead of reopening (backoff._breaker_failure):
                -- reopen on its behalf, from the time it failed.
                SELECT pg_catalog.max(f.failed_at) INTO v_failed
                FROM backoff.queue_failures AS f
                WHERE f.queue = p_queue AND f.failed_at >= v_state.half_open_at
                  AND f.failed_at > v_state.counted_from;
                IF v_failed IS NOT NULL THEN
                    UPDATE backoff.queue_breakers AS b
                    SET opened_at = v_failed,
                        half_open_at = backoff._clamp_time(v_failed + p_q.breaker_cooldown),
                        probes_left = NULL,
                        probe_ids = NULL,
                        counted_from = v_failed
                    WHERE b.queue = p_queue;
                    RETURN;
                END IF;
                v_probes := coalesce(v_state.probes_left, p_q.breaker_probes);
                v_ids := coalesce(v_state.probe_ids, '{}');
                IF v_probes < 1 THEN
                    IF EXISTS (SELECT FROM backoff.jobs AS j
                               WHERE j.id = ANY (v_state.probe_ids) AND j.status = 'running') THEN
                        RETURN;  -- every probe is out: wait for a result
                    END IF;
                    v_probes := p_q.breaker_probes;
                    v_ids := '{}';
                END IF;
                v_allow := least(v_allow, v_probes);
            END IF;
        END IF;
    END IF;

    IF p_q.rate IS NOT NULL THEN
        v_burst := backoff._queue_burst(p_q.rate, p_q.burst);
        v_nslots := least(16, v_burst);
        FOR v_pass IN 1..2 LOOP
            -- Take free slots, fullest first, until their whole tokens
            -- cover the limit; a slot another claimer holds is skipped
            -- (never waited for). Each slot's tokens are refilled lazily
            -- from p_now at its share of the rate, up to its share of the
            -- burst; a clock behind refilled_at adds nothing.
            v_sum := 0;
            v_slots := '{}';
            v_avails := '{}';
            OPEN v_cur FOR
                SELECT t.slot,
                       least(v_burst / v_nslots + (t.slot < v_burst % v_nslots)::integer,
                             t.tokens + p_q.rate * (v_burst / v_nslots + (t.slot < v_burst % v_nslots)::integer) / v_burst
                                 * greatest(0, extract(epoch FROM p_now - t.refilled_at)::double precision)) AS avail
                FROM backoff.queue_tokens AS t
                WHERE t.queue = p_queue AND t.slot < v_nslots
                ORDER BY 2 DESC, t.slot DESC
                FOR UPDATE OF t SKIP LOCKED;
            LOOP
                FETCH v_cur INTO v_slot, v_avail;
                EXIT WHEN NOT FOUND;
                v_slots := v_slots || v_slot;
                v_avails := v_avails || v_avail;
                v_sum := v_sum + v_avail;
                -- (1e-9: a slot's share of the rate is a fraction, so a sum
                -- of refills can fall a rounding error short of a token.)
                EXIT WHEN v_sum + 1e-9 >= v_allow;
            END LOOP;
            CLOSE v_cur;
            EXIT WHEN v_sum + 1e-9 >= v_allow OR v_pass = 2;
            -- Fewer tokens than asked: create the slots a new bucket lacks
            -- (full). One creator at a time, elected without waiting: a
            -- claimer that loses gets what it holds now.
            EXIT WHEN (SELECT pg_catalog.count(*) FROM backoff.queue_tokens AS t
                       WHERE t.queue = p_queue AND t.slot < v_nslots) >= v_nslots;
            EXIT WHEN NOT pg_catalog.pg_try_advisory_xact_lock(
                pg_catalog.hashtext('backoff.queue_tokens'), pg_catalog.hashtext(p_queue));
            INSERT INTO backoff.queue_tokens (queue, slot, tokens, refilled_at)
            SELECT p_queue, s.slot, v_burst / v_nslots + (s.slot < v_burst % v_nslots)::integer, p_now
            FROM pg_catalog.generate_series(0, v_nslots - 1) AS s(slot)
            ON CONFLICT (queue, slot) DO NOTHING;
        END LOOP;
        v_allow := least(v_allow::double precision, floor(v_sum + 1e-9))::integer;
        IF v_allow < 1 THEN
            RETURN;
        END IF;
    END IF;

    -- backoff.claim's statement, with the allowance as its limit. Without
    -- probes to record, the rows go straight to the result (RETURN QUERY,
    -- counted afterwards); a half-open breaker's claim keeps them to record
    -- the probes' ids.
    IF v_probes IS NULL THEN
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.segment = backoff._current_segment()
          AND j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.segment = backoff._current_segment()
              AND c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT v_allow
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count = 0 THEN
            RETURN;
        END IF;
    ELSE
        WITH claimed AS (
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.segment = backoff._current_segment()
          AND j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.segment = backoff._current_segment()
              AND c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT v_allow
            FOR UPDATE SKIP LOCKED))
        RETURNING j AS job)
        SELECT pg_catalog.array_agg(c.job) INTO v_jobs FROM claimed AS c;
        v_count := coalesce(pg_catalog.cardinality(v_jobs), 0);
        IF v_count = 0 THEN
            RETURN;
        END IF;
        RETURN QUERY SELECT * FROM pg_catalog.unnest(v_jobs);
    END IF;
    IF v_probes IS NOT NULL THEN
        UPDATE backoff.queue_breakers AS b
        SET probes_left = v_probes - v_count,
            probe_ids = v_ids || ARRAY(SELECT r.id FROM pg_catalog.unnest(v_jobs) AS r)
        WHERE b.queue = p_queue;
    END IF;
    IF p_q.rate IS NOT NULL THEN
        -- Take the claimed jobs' tokens from the slots held, fullest first;
        -- a slot nothing was taken from is not written.
        v_left := v_count;
        v_wslots := '{}';
        v_wtokens := '{}';
        FOR i IN 1 .. pg_catalog.cardinality(v_slots) LOOP
            EXIT WHEN v_left <= 0;
            v_take := least(v_left, v_avails[i]);
            v_wslots := v_wslots || v_slots[i];
            v_wtokens := v_wtokens || greatest(0, v_avails[i] - v_take);
            v_left := v_left - v_take;
        END LOOP;
        IF pg_catalog.cardinality(v_wslots) = 1 THEN  -- the usual case
            UPDATE backoff.queue_tokens AS t
            SET tokens = v_wtokens[1], refilled_at = greatest(t.refilled_at, p_now)
            WHERE t.queue = p_queue AND t.slot = v_wslots[1];
            RETURN;
        END IF;
        UPDATE backoff.queue_tokens AS t
        SET tokens = w.tokens, refilled_at = greatest(t.refilled_at, p_now)
        FROM ROWS FROM (pg_catalog.unnest(v_wslots), pg_catalog.unnest(v_wtokens)) AS w(slot, tokens)
        WHERE t.queue = p_queue AND t.slot = w.slot;
    END IF;
END
$$;

-- backoff.claim(queue, worker, limit, lease, now): claim up to p_limit due
-- jobs of a queue in one UPDATE. The candidates are locked with
-- FOR UPDATE SKIP LOCKED, so concurrent claimers never wait for, nor share,
-- a row. Hot path: one statement, no extra queries.
--
-- Plan notes (docs/design.md#plans): the candidates are collected into an
-- array (an InitPlan) and the UPDATE finds them with id = ANY(array) on the
-- primary key. The usual id IN (SELECT ... LIMIT p_limit FOR UPDATE SKIP
-- LOCKED) can get a generic plan that hash-joins a sequential scan of the
-- whole table. The lease comes from the job's recorded policy, one
-- primary-key look-up, so that a claimed row costs no PL/pgSQL call (profile
-- in docs/adr/0041); backoff._job_policy, the governing policy's answer, is
-- only reached when that row is gone (a policy deleted after the job was
-- enqueued: its queue's, else 'default', else 22023). A paused queue
-- (backoff.queues.paused) gives nothing.
--
-- Queue controls (docs/adr/0045): the fast statement's probe of
-- backoff.queues also gives nothing for a queue with a rate or with a
-- breaker that is not closed (the breaker's state row is only read for a
-- queue row with breaker_failures set; a closed breaker does not hold
-- claims back, so it takes the fast statement too). Only when the fast
-- statement claimed nothing does claim look at the queue's row again and,
-- for such a queue that is not paused, take backoff._claim_controlled. A
-- queue without controls pays nothing more while it has due jobs; the
-- probe is a one-time filter, so a held queue's fast statement reads no
-- job.
--
-- The candidates come from the current live segment only (docs/adr/0061),
-- the others pruned when the statement is planned (backoff._current_segment
-- is a constant): a segment switched from keeps, until backoff.rotate
-- truncates it, the index entries of every job it held, which no vacuum
-- removes while an old snapshot is open, and a claim that read them would
-- walk them all. A job left in another segment (an enqueue that raced the
-- switch, a row locked while rotate moved the others) is claimable once the
-- next rotate has moved it.
CREATE OR REPLACE FUNCTION backoff.claim(
    p_queue  text,
    p_worker text,
    p_limit  integer DEFAULT 1,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_controls backoff.queues;
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_worker := backoff._check_name('worker', p_worker);
    IF p_queue IS NULL OR p_queue = '' OR p_worker IS NULL OR p_limit IS NULL OR p_limit < 1
       OR p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        IF p_queue IS NULL OR p_queue = '' THEN
            RAISE EXCEPTION 'queue must be a non-empty name, got "%"', coalesce(p_queue, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_worker IS NULL THEN
            RAISE EXCEPTION 'claim in queue "%": worker must not be null', p_queue
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF p_limit IS NULL OR p_limit < 1 THEN
            RAISE EXCEPTION 'claim in queue "%": limit must be at least 1, got "%"', p_queue, coalesce(p_limit::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE EXCEPTION 'claim in queue "%": lease must be positive and at most 876600 hours, got "%"', p_queue, p_lease
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    p_now := backoff._now(p_now);

    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;
    -- The same statement twice, with LIMIT 1 and with LIMIT p_limit. A
    -- parameter in LIMIT makes the generic plan look expensive (the planner
    -- assumes it keeps 10% of the rows), so the plan cache would plan the
    -- statement again on every call; with a constant it keeps one generic
    -- plan, which matters for one job per call. A batch amortizes planning.
    IF p_limit = 1 THEN
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.segment = backoff._current_segment()
          AND j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.segment = backoff._current_segment()
              AND c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT EXISTS (SELECT FROM backoff.queues AS q
                              WHERE q.name = p_queue
                                AND (q.paused OR q.rate IS NOT NULL
                                        OR (q.breaker_failures IS NOT NULL
                                            AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                                                        WHERE b.queue = q.name AND b.opened_at IS NOT NULL))))
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    ELSE
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.segment = backoff._current_segment()
          AND j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.segment = backoff._current_segment()
              AND c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT EXISTS (SELECT FROM backoff.queues AS q
                              WHERE q.name = p_queue
                                AND (q.paused OR q.rate IS NOT NULL
                                        OR (q.breaker_failures IS NOT NULL
                                            AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                                                        WHERE b.queue = q.name AND b.opened_at IS NOT NULL))))
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    END IF;
    IF FOUND THEN
        RETURN;
    END IF;

    -- Nothing claimed: the queue is empty, paused, or under controls (a
    -- rate, or a breaker that is not closed), which the statement above
    -- leaves to this path. Only now do controls cost a query.
    SELECT q.* INTO v_controls
    FROM backoff.queues AS q
    WHERE q.name = p_queue
      AND NOT q.paused
      AND (q.rate IS NOT NULL
           OR (q.breaker_failures IS NOT NULL
               AND EXISTS (SELECT FROM backoff.queue_breakers AS b WHERE b.queue = q.name AND b.opened_at IS NOT NULL)));
    IF FOUND THEN
        RETURN QUERY SELECT * FROM backoff._claim_controlled(p_queue, p_worker, p_limit, p_lease, p_now, v_controls);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.claim(text, text, integer, interval, timestamptz) IS
'Claim up to p_limit due jobs (status pending or retrying, run_at <= p_now) of p_queue for p_worker: higher priority first, then earliest run_at, then id. Each becomes running with attempts + 1 (attempts counts every claim of the job and never goes down, so the new value is a fencing token no other claim of the job has: pass it to complete, fail, heartbeat and snooze; the counted attempt that max_attempts bounds is attempts - uncounted_attempts), lease_until = p_now + (p_lease, else the job''s policy lease), locked_by = p_worker, last_attempted_at = p_now. Rows locked by other claimers are skipped (FOR UPDATE SKIP LOCKED), so concurrent claims never overlap. A paused queue (backoff.queues.paused) gives no rows. Queue controls (backoff.queues): with an open circuit breaker no rows; half open, at most breaker_probes jobs in total until a complete or fail of the queue closes or reopens it (exact under concurrency; a claim that finds the breaker''s state held by a concurrent transaction gets no rows now); with a rate, at most the whole tokens of the queue''s bucket (rate per second, burst) that concurrent claims do not hold (the bucket is split into up to 16 slots), so fewer rows than p_limit, never waiting. backoff.queue_state says when a claim can return jobs again.
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control or format characters, a limit < 1, a lease <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on p_queue. lease_until stays within year 9999.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT id, status, attempts, payload, lease_until - now() AS lease FROM backoff.claim(''emails'', ''worker-1'', 10);';

-- backoff.acquire(job id, worker, lease, now): claim one given job if it is
-- due, for workflow engines that choose the step themselves
-- (docs/adr/0010-acquire-by-id.md). One guarded UPDATE; only when it
-- matches nothing is the row read to choose the error, so two workers
-- acquiring the same job get exactly one winner: the other waits for the
-- winner's row lock and then sees a running job (BK002).
CREATE OR REPLACE FUNCTION backoff.acquire(
    p_job_id bigint,
    p_worker text,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot acquire job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_worker := backoff._check_name('worker', p_worker);
    IF p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        RAISE EXCEPTION 'cannot acquire job "%": lease must be positive and at most 876600 hours, got "%"', p_job_id, p_lease
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    -- Twice when backoff.rotate moved the row while the first waited for it
    -- (docs/adr/0061): the second statement's snapshot sees it moved.
    FOR v_try IN 1..2 LOOP
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            -- As in backoff.claim: the job's recorded policy first.
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.id = p_job_id
          -- "pending or retrying", spelled so that it does not imply the
          -- predicate of jobs_claimable_idx: a generic plan would otherwise
          -- scan every due job of that index for this one id.
          AND j.status NOT IN ('running', 'completed', 'dead_lettered', 'cancelled', 'blocked')
          AND j.run_at <= p_now
        RETURNING j.* INTO v_job;
        IF FOUND THEN
            -- A scoped caller that acquired another queue's job: it looks
            -- missing, and the error undoes the UPDATE (docs/adr/0058).
            IF backoff._scope_in_force() THEN
                PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
            END IF;
            RETURN v_job;
        END IF;
    END LOOP;

    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
    END IF;
    IF v_job.status = 'running' THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is running attempt "%"', p_job_id, v_job.attempts
            USING ERRCODE = 'BK002';
    END IF;
    IF v_job.status IN ('completed', 'dead_lettered', 'cancelled') THEN
        RAISE EXCEPTION 'cannot acquire job "%": it is "%"', p_job_id, v_job.status
            USING ERRCODE = 'BK003';
    END IF;
    -- A job waiting for its parents (docs/adr/0087) has no time it is
    -- ready at: BK004 without one.
    IF v_job.status = 'blocked' THEN
        RAISE EXCEPTION 'job "%" is not ready: it is blocked by the jobs it depends on', p_job_id
            USING ERRCODE = 'BK004',
                  HINT = format('attempts=%s', v_job.attempts);
    END IF;
    RAISE EXCEPTION 'job "%" is not ready until "%" (attempts "%")',
        p_job_id, backoff._iso8601(v_job.run_at), v_job.attempts
        USING ERRCODE = 'BK004',
              DETAIL = backoff._iso8601(v_job.run_at),
              HINT = format('attempts=%s', v_job.attempts);
END
$$;

COMMENT ON FUNCTION backoff.acquire(bigint, text, interval, timestamptz) IS
'Claim the job p_job_id for p_worker if it is due (pending or retrying with run_at <= p_now), exactly as claim would: running, attempts + 1 (the new value is the fencing token), lease_until = p_now + (p_lease, else the policy lease), locked_by = p_worker; returns the job. For workflow engines that pick the step themselves. Two concurrent calls on one due job: exactly one wins, the other gets BK002. A paused queue does not stop it.
Errors: BK004 not ready: message ''job "42" is not ready until "2026-01-02T03:04:05.000000Z" (attempts "2")'', DETAIL = run_at in ISO 8601 UTC, HINT = ''attempts=2''; BK004 also for a job blocked by the jobs it depends on (no DETAIL); BK002 the job is running; BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on; 22023 a NULL id, a worker that is not 1 to 128 bytes without control or format characters, a lease <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''steps'', ''{"step": "charge"}'');
SELECT id, status, attempts, locked_by FROM backoff.acquire(1, ''orchestrator-1'');';

-- backoff._move_finished(ids): move the finished jobs among p_ids that are
-- still in a live segment to the finished partition (segment 0) in one
-- statement, a DELETE feeding an INSERT, never a cross-partition UPDATE (a
-- concurrent locker of a row moved by UPDATE gets a serialization error; of
-- a deleted row it skips it), and release their dedupe keys. fail and reap
-- decide a dead letter with the UPDATE that also decides a retry, then move
-- it with this (docs/adr/0061). The INSERT names the finished partition,
-- as every move into it does: routed through backoff.jobs, each statement
-- would set up the routing to it again. Returns the moved rows. Private.
CREATE OR REPLACE FUNCTION backoff._move_finished(p_ids bigint[])
RETURNS SETOF backoff.jobs
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH d AS (
        DELETE FROM backoff.jobs AS j
        WHERE j.id = ANY (p_ids)
          AND j.segment <> 0
          AND j.status IN ('completed', 'dead_lettered', 'cancelled')
        RETURNING j.*
    ), k AS (
        DELETE FROM backoff.dedupe_keys AS k
        WHERE k.queue = ANY (ARRAY(SELECT d.queue FROM d WHERE d.dedupe_key IS NOT NULL))
          AND k.dedupe_key = ANY (ARRAY(SELECT d.dedupe_key FROM d WHERE d.dedupe_key IS NOT NULL))
          AND k.job_id = ANY (ARRAY(SELECT d.id FROM d WHERE d.dedupe_key IS NOT NULL))
    )
    INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                            lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                            dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                            lease_expiries, schedule, schedule_slot, segment)
    OVERRIDING SYSTEM VALUE
    SELECT d.id, d.queue, d.payload, d.status, d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
           d.lease_until, d.locked_by, d.last_attempted_at, d.last_failed_at, d.last_error, d.errors,
           d.dead_letter_reason, d.dedupe_key, d.created_at, d.completed_at, d.uncounted_attempts,
           d.lease_expiries, d.schedule, d.schedule_slot, 0
    FROM d
    RETURNING j.*
$$;

-- backoff._add_segment(): one more live segment for backoff.jobs
-- (docs/adr/0082), for backoff.rotate when no segment it could switch to is
-- empty on disk: a transaction that has read backoff.jobs (a report,
-- pg_dump) holds ACCESS SHARE on every segment it read until it ends, so
-- none of them can be truncated, and a claim in a segment switched to
-- without truncation would walk its dead row versions. A table created now
-- was read by nobody.
--
-- The new table copies segment 1 (columns, defaults, CHECK constraints,
-- its own primary key and schedule-slot index, and the partitioned
-- indexes' definitions, which ATTACH then adopts as the parent's), so the
-- shape of a segment is decided once, by the migration that made segment
-- 1. ATTACH PARTITION takes SHARE UPDATE EXCLUSIVE on backoff.jobs, which
-- readers and writers do not conflict with; the table is empty, so
-- checking its partition bound reads nothing. Runs as the caller, which is
-- backoff.rotate, SECURITY DEFINER as backoff_owner: the owner of the new
-- table. Returns the new segment's number, the smallest not in
-- backoff.segments; the caller records it there.
CREATE OR REPLACE FUNCTION backoff._add_segment()
RETURNS smallint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_seg smallint;
BEGIN
    SELECT g::smallint INTO v_seg
    FROM pg_catalog.generate_series(1, 32767) AS g
    WHERE NOT EXISTS (SELECT FROM backoff.segments AS s WHERE s.segment = g)
    ORDER BY g
    LIMIT 1;
    EXECUTE pg_catalog.format(
        'CREATE TABLE backoff.%I (LIKE backoff.jobs_live_1 INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)',
        'jobs_live_' || v_seg);
    EXECUTE pg_catalog.format('ALTER TABLE backoff.jobs ATTACH PARTITION backoff.%I FOR VALUES IN (%s)',
                              'jobs_live_' || v_seg, v_seg);
    RETURN v_seg;
END
$$;

-- backoff._next_segment(current, max): the live segment backoff.rotate
-- switches to from the current one (docs/adr/0061, docs/adr/0082), or NULL
-- when there is none, with a note saying why or what was done.
--
-- The next segment must be empty on disk (truncated, or never written):
-- one that holds only dead row versions, its truncate held off by a
-- transaction that read it, would make every claim walk them as long as
-- that transaction lasts. Among those, the first after the current one in
-- the order of their numbers, so that in a ring of three each segment has
-- two rotations to be truncated. When none is empty, a new segment is
-- added, up to p_max; past that, the first segment after the current one
-- that holds no row is taken as before segments were added (its dead
-- versions are walked until vacuum or a truncate removes them).
-- A segment that holds rows is never switched to: rows of a segment that
-- is not current are moved out by rotate, and a segment with rows left is
-- not yet empty.
CREATE OR REPLACE FUNCTION backoff._next_segment(p_current smallint, p_max integer)
RETURNS TABLE (segment smallint, added boolean, note text)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ring  smallint[];
    v_seg   smallint;
    v_timeout text;
BEGIN
    added := false;
    -- The other segments, the ones after the current first.
    v_ring := ARRAY(SELECT s.segment FROM backoff.segments AS s
                    WHERE s.segment <> p_current
                    ORDER BY s.segment <= p_current, s.segment);
    FOREACH v_seg IN ARRAY v_ring LOOP
        IF pg_catalog.pg_relation_size(pg_catalog.format('backoff.jobs_live_%s', v_seg)::pg_catalog.regclass) = 0 THEN
            segment := v_seg;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;

    IF cardinality(v_ring) + 1 < p_max THEN
        -- ATTACH waits for no reader or writer; only a schema change or a
        -- manual ANALYZE of backoff.jobs holds a lock it waits for, and
        -- while it waits, statements on backoff.jobs queue behind it.
        v_timeout := pg_catalog.current_setting('lock_timeout');
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
            segment := backoff._add_segment();
            PERFORM pg_catalog.set_config('lock_timeout', v_timeout, true);
            added := true;
            note := pg_catalog.format('segment %s added: no segment was empty on disk (a transaction that read backoff.jobs holds the others until it ends)',
                                      segment);
            RETURN NEXT;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            note := 'no segment was empty on disk, and adding one did not get its lock on backoff.jobs within 50 ms';
        END;
    ELSE
        note := pg_catalog.format('no segment was empty on disk, and there are %s, the most rotate adds', cardinality(v_ring) + 1);
    END IF;

    -- Past the limit: the first that holds no row.
    FOREACH v_seg IN ARRAY v_ring LOOP
        IF NOT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.segment = v_seg) THEN
            segment := v_seg;
            note := note || pg_catalog.format(': switched to segment %s, which holds only dead rows', v_seg);
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
    note := note || ': every other segment still holds jobs';
    RETURN NEXT;
END
$$;

-- backoff._check_output(queue, output): 22023 when a job's output is
-- larger than its queue's limit (backoff.queues.max_output_bytes, else
-- backoff.settings.max_output_bytes, 1 MiB by default), naming its size
-- and the limit. The size is the jsonb's uncompressed size, as for
-- payloads (backoff._check_payload). Private; complete and complete_many
-- call it only for an output over 1 KiB, the smallest limit allowed, so a
-- small output costs no read of the settings.
CREATE OR REPLACE FUNCTION backoff._check_output(p_queue text, p_output jsonb)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_max  integer;
    v_size integer := pg_catalog.pg_column_size(p_output);
BEGIN
    SELECT coalesce((SELECT q.max_output_bytes FROM backoff.queues AS q WHERE q.name = p_queue),
                    (SELECT s.max_output_bytes FROM backoff.settings AS s),
                    1048576)
    INTO v_max;
    IF v_size > v_max THEN
        RAISE EXCEPTION 'output is % bytes, over max_output_bytes of queue "%" (% bytes)', v_size, p_queue, v_max
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'store large results elsewhere and return a reference to them; an admin sets the limit in backoff.queues or backoff.settings';
    END IF;
END
$$;

-- backoff._record_outputs(ids, queues, outputs, now): record the outputs
-- of jobs that have just completed, after checking each against its
-- queue's limit (backoff._check_output; the error undoes the completion).
-- NULL outputs record nothing. An output kept from before (a job replayed
-- and completed again) is replaced: the latest completion is the job's
-- result. Private; complete and complete_many call it only when an output
-- was given.
CREATE OR REPLACE FUNCTION backoff._record_outputs(
    p_ids     bigint[],
    p_queues  text[],
    p_outputs jsonb[],
    p_now     timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM backoff._check_output(t.queue, t.output)
    FROM unnest(p_queues, p_outputs) AS t(queue, output)
    WHERE pg_catalog.pg_column_size(t.output) > 1024;
    INSERT INTO backoff.job_outputs AS o (job_id, output, recorded_at)
    SELECT t.id, t.output, p_now
    FROM unnest(p_ids, p_outputs) AS t(id, output)
    WHERE t.output IS NOT NULL
    ON CONFLICT (job_id) DO UPDATE SET output = excluded.output, recorded_at = excluded.recorded_at;
END
$$;

-- backoff._release_blocked(ids, now): the blocked jobs among p_ids become
-- pending, in the current segment, and a worker waiting for their queue is
-- woken at commit when one is due. Their counters go. Called by
-- backoff._settle_dependents when a child's last parent settles, and by
-- backoff.unblock. An UPDATE that missed a row backoff.rotate moved while
-- it waited runs again (a new statement sees the moved row), twice at most.
-- Private.
CREATE OR REPLACE FUNCTION backoff._release_blocked(p_ids bigint[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_left   bigint[] := p_ids;
    v_queues text[]   := '{}';
    v_due    text[];
BEGIN
    DELETE FROM backoff.job_blockers AS b WHERE b.job_id = ANY (p_ids);
    FOR v_try IN 1..3 LOOP
        WITH u AS (
            UPDATE backoff.jobs AS j
            SET status = 'pending'
            WHERE j.id = ANY (v_left)
              AND j.status = 'blocked'
            RETURNING j.queue, j.run_at
        )
        SELECT array_agg(DISTINCT u.queue) FILTER (WHERE u.run_at <= p_now) INTO v_due FROM u;
        v_queues := v_queues || coalesce(v_due, '{}');
        v_left := ARRAY(SELECT j.id FROM backoff.jobs AS j WHERE j.id = ANY (v_left) AND j.status = 'blocked');
        EXIT WHEN cardinality(v_left) = 0;
    END LOOP;
    -- A claim reads the current segment only (docs/adr/0061).
    PERFORM backoff._move_to_current_segment(p_ids);
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_queues) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;

-- backoff._settle_dependents(parent ids, outcome, now): a parent finished
-- (p_outcome 'completed', 'dead_lettered' or 'cancelled'); settle its open
-- edges (backoff.job_dependencies) and what they block. Called in the
-- transaction that finishes the parents, by complete, complete_many,
-- fail, reap and cancel, only when backoff.job_dependencies names one of
-- them (a probe, so that jobs without dependents pay one index look-up).
--
-- Each child's counter (backoff.job_blockers) is decremented under its
-- row lock: of two last parents settling at once in READ COMMITTED, the
-- second waits for the first's lock and then re-reads the row, sees
-- remaining = 1 and takes it to 0, so one of them always unblocks the
-- child; at REPEATABLE READ or SERIALIZABLE the second gets a
-- serialization failure (40001) and its retry settles it. The last parent
-- decrements one row, whatever the fan-in (docs/adr/0087).
--
-- A completed parent satisfies the edge. One that ended otherwise applies
-- the edge's policy: 'run' satisfies it, 'wait' keeps the child blocked
-- (waiting, until backoff.unblock or a replay of the parent), 'cancel'
-- cancels the child, naming the parent, and the cancel settles the
-- child's own children in turn. A child with nothing left open and
-- nothing waiting becomes pending, moved into the current segment so that
-- the next claim sees it, and a worker waiting for its queue is woken.
-- Private.
CREATE OR REPLACE FUNCTION backoff._settle_dependents(
    p_parent_ids bigint[],
    p_outcome    text,
    p_now        timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_ready     bigint[];
    v_failed    bigint[];
    v_failed_by bigint[];
    v_queues    text[];
BEGIN
    -- The children's counters, locked in id order: two settlements that
    -- share children take their locks in the same order and cannot
    -- deadlock on them.
    PERFORM FROM backoff.job_blockers AS b
    WHERE b.job_id = ANY (ARRAY(SELECT d.child_id FROM backoff.job_dependencies AS d
                                WHERE d.parent_id = ANY (p_parent_ids) AND d.state = 'open'))
    ORDER BY b.job_id
    FOR UPDATE;
    WITH e AS (
        UPDATE backoff.job_dependencies AS d
        SET state = CASE WHEN p_outcome = 'completed' OR d.on_failure = 'run' THEN 'satisfied'
                         WHEN d.on_failure = 'wait' THEN 'waiting'
                         ELSE 'failed' END
        WHERE d.parent_id = ANY (p_parent_ids)
          AND d.state = 'open'
        RETURNING d.child_id, d.parent_id, d.state
    ), c AS (
        SELECT e.child_id,
               count(*) AS n,
               count(*) FILTER (WHERE e.state = 'waiting') AS w,
               min(e.parent_id) FILTER (WHERE e.state = 'failed') AS failed_by
        FROM e
        GROUP BY e.child_id
    ), b AS (
        UPDATE backoff.job_blockers AS b
        SET remaining = b.remaining - c.n,
            waiting = b.waiting + c.w
        FROM c
        WHERE b.job_id = c.child_id
        RETURNING b.job_id, b.remaining, b.waiting, c.failed_by
    )
    SELECT array_agg(b.job_id) FILTER (WHERE b.failed_by IS NULL AND b.remaining = 0 AND b.waiting = 0),
           array_agg(b.job_id ORDER BY b.job_id) FILTER (WHERE b.failed_by IS NOT NULL),
           array_agg(b.failed_by ORDER BY b.job_id) FILTER (WHERE b.failed_by IS NOT NULL)
    INTO v_ready, v_failed, v_failed_by
    FROM b;

    IF v_ready IS NOT NULL THEN
        PERFORM backoff._release_blocked(v_ready, p_now);
    END IF;

    -- 'cancel' edges: the child is cancelled (it holds no lock of ours
    -- but its counter), which settles its own children in turn.
    IF v_failed IS NOT NULL THEN
        DELETE FROM backoff.job_blockers AS b WHERE b.job_id = ANY (v_failed);
        FOR i IN 1..cardinality(v_failed) LOOP
            IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = v_failed[i] AND j.status = 'blocked') THEN
                PERFORM backoff.cancel(v_failed[i],
                                       pg_catalog.format('parent job "%s" was %s', v_failed_by[i], p_outcome),
                                       p_now);
            END IF;
        END LOOP;
    END IF;
END
$$;

-- backoff._reopen_dependents(parent ids): parents that ended without
-- completing are replayed; the 'wait' edges they left waiting open again,
-- so the children wait for the replayed run instead of an operator
-- (docs/adr/0087). The children's counters are locked in id order, as
-- backoff._settle_dependents locks them. Edges already satisfied ('run'),
-- failed (the child was cancelled) or released stay as they are. Called by
-- replay and replay_dead_letters only when such an edge exists. Private.
CREATE OR REPLACE FUNCTION backoff._reopen_dependents(p_parent_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM FROM backoff.job_blockers AS b
    WHERE b.job_id = ANY (ARRAY(SELECT d.child_id FROM backoff.job_dependencies AS d
                                WHERE d.parent_id = ANY (p_parent_ids) AND d.state = 'waiting'))
    ORDER BY b.job_id
    FOR UPDATE;
    WITH e AS (
        UPDATE backoff.job_dependencies AS d
        SET state = 'open'
        WHERE d.parent_id = ANY (p_parent_ids)
          AND d.state = 'waiting'
        RETURNING d.child_id
    ), c AS (
        SELECT e.child_id, count(*) AS n FROM e GROUP BY e.child_id
    )
    UPDATE backoff.job_blockers AS b
    SET remaining = b.remaining + c.n,
        waiting = b.waiting - c.n
    FROM c
    WHERE b.job_id = c.child_id;
END
$$;

-- backoff.complete(job id, attempt, now, output): mark the running attempt
-- p_attempt of a job completed, recording its output when one is given
-- (backoff.job_outputs, apart from the job row). One guarded statement
-- moves it to the finished partition; the error path reads the row only
-- when it matched nothing (backoff._raise_fencing_error). The jobs that
-- depend on it are settled in the same transaction (docs/adr/0087).
CREATE OR REPLACE FUNCTION backoff.complete(
    p_job_id  bigint,
    p_attempt integer,
    p_now     timestamptz DEFAULT now(),
    p_output  jsonb DEFAULT NULL
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only, as backoff.claim (docs/adr/0041): a custom plan of the
-- move (it finds the row by id in every segment) is planned again at each
-- call, and planning opens and locks every index of every segment, more
-- locks than a backend keeps on its fast path, so concurrent completions
-- queue on the shared lock table.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job       backoff.jobs;
    v_scoped    boolean;
    v_half_open boolean;
    v_found     boolean;
    v_children  boolean;
    v_awaited   boolean;
BEGIN
    p_now := backoff._now(p_now);
    -- The live row is deleted and the finished one inserted into the
    -- finished partition, by its name (as backoff._move_finished), in one
    -- statement (docs/adr/0061). It is looked for in the current segment,
    -- where claims put running jobs: the other segments are pruned when the
    -- statement is planned, so it neither locks nor opens them. A job not
    -- found there is moved into it when it is live in another segment
    -- (backoff._move_to_current_segment), and looked for again; and once
    -- more: a row that backoff.rotate moved while a statement waited for it
    -- is gone from its snapshot, and the next statement, with a new
    -- snapshot, finds it.
    FOR v_try IN 1..3 LOOP
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = p_job_id
              AND j.segment = backoff._current_segment()
              AND j.status = 'running'
              AND j.attempts = p_attempt
            RETURNING j.*
        )
        INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'completed', d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
               NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error, d.errors,
               d.dead_letter_reason, d.dedupe_key, d.created_at, p_now, d.uncounted_attempts,
               d.lease_expiries, d.schedule, d.schedule_slot, 0
        FROM d
        RETURNING j.* INTO v_job;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF NOT v_found THEN
        PERFORM backoff._raise_fencing_error('complete', p_job_id, p_attempt);
    END IF;
    -- The job's dedupe key is released by a statement of its own, run only
    -- for a job that has one: in the move's statement its DELETE was started
    -- for every job, about 50,000 instructions. Until this transaction
    -- commits, an enqueue with the key sees the job unfinished either way.
    IF v_job.dedupe_key IS NOT NULL THEN
        DELETE FROM backoff.dedupe_keys AS k
        WHERE k.queue = v_job.queue AND k.dedupe_key = v_job.dedupe_key AND k.job_id = v_job.id;
    END IF;
    -- Probes in one statement, of tables that are empty or one row unless
    -- the feature is used (queue grants or require_queue_grants; a breaker
    -- that opened), so that they cost a completion next to nothing then:
    -- may the caller be scoped, is this queue's breaker half open, and does
    -- a job depend on this one (docs/adr/0087), does anyone await it
    -- (backoff.await_job).
    SELECT backoff._scope_in_force(),
           EXISTS (SELECT FROM backoff.queue_breakers AS b
                   WHERE b.queue = v_job.queue AND b.half_open_at <= p_now),
           EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id),
           EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id)
    INTO v_scoped, v_half_open, v_children, v_awaited;
    IF v_scoped THEN
        -- Another queue's job looks missing; the error undoes the UPDATE.
        PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
    END IF;
    IF p_output IS NOT NULL THEN
        PERFORM backoff._record_outputs(ARRAY[p_job_id], ARRAY[v_job.queue], ARRAY[p_output], p_now);
    END IF;
    IF v_children THEN
        PERFORM backoff._settle_dependents(ARRAY[p_job_id], 'completed', p_now);
    END IF;
    IF v_awaited THEN
        PERFORM backoff._notify_awaiters(ARRAY[p_job_id]);
    END IF;
    IF v_half_open THEN
        -- A success closes the queue's half-open breaker (docs/adr/0045).
        UPDATE backoff.queue_breakers AS b
        SET opened_at = NULL, half_open_at = NULL, probes_left = NULL, probe_ids = NULL, counted_from = p_now
        WHERE b.queue = v_job.queue
          AND b.half_open_at <= p_now;
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.complete(bigint, integer, timestamptz, jsonb) IS
'Mark job p_job_id completed, if it is running attempt p_attempt (the attempts value claim returned: the fencing token, which no other claim of the job ever has, across snooze, cancel and replay too). Sets completed_at = p_now, clears lease_until and locked_by; returns the job. p_output (jsonb, NULL = none; pass it by name) is recorded as the job''s result, read by backoff.job_output and by its dependents through backoff.parent_outputs; at most the queue''s max_output_bytes (backoff.queues, else backoff.settings, 1 MiB by default). The jobs that depend on this one are settled in the same transaction: a blocked job whose last parent this was becomes pending (docs/workflows.md). A completed job of a queue whose circuit breaker is half open closes the breaker.
Errors: BK002 the job is live but not running this attempt (its lease was reaped, or another attempt holds it); BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id or attempt, an attempt < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(), an output over the queue''s max_output_bytes (naming its size and the limit); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts FROM backoff.complete(1, 1, p_output => ''{"sent": true}'');';

-- backoff.complete_many(job ids, attempts, now, outputs): complete a batch
-- in one statement (DELETE of the live rows joined to the unnested arrays,
-- INSERT of the finished ones). Fenced per entry: a job not running
-- the given attempt is left alone and its id not returned. Outputs, when
-- given, are recorded for the jobs completed, and the jobs that depend on
-- them are settled in the same transaction (docs/adr/0087).
--
-- Plan notes: jobs are found with id = ANY(p_job_ids) (the primary key) and
-- joined to the arrays by hash, never by a nested loop. Statistics taken
-- while nothing runs say status = 'running' matches about one row, so
-- without this the planner nests a scan of every running row inside a scan
-- of the arrays: running x batch comparisons, which took 4.9 s for 1,000
-- ids among 30,000 running jobs and made four Workers on one pool slower
-- than one (docs/adr/0026-worker-runner.md).
CREATE OR REPLACE FUNCTION backoff.complete_many(
    p_job_ids  bigint[],
    p_attempts integer[],
    p_now      timestamptz DEFAULT now(),
    p_outputs  jsonb[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
SET enable_nestloop = off
-- Generic plans only, as backoff.complete: a custom plan is planned again
-- at each call, and planning locks every index of every segment.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_scope text[];
    v_n     bigint;
    v_total bigint := 0;
    v_ids   bigint[];
    v_qs    text[];
    v_done  bigint[] := '{}';
    v_doneq text[]   := '{}';
BEGIN
    p_now := backoff._now(p_now);
    IF p_job_ids IS NULL OR p_attempts IS NULL
       OR cardinality(p_job_ids) <> cardinality(p_attempts)
       OR cardinality(p_job_ids) <> coalesce(cardinality(p_outputs), cardinality(p_job_ids)) THEN
        RAISE EXCEPTION 'complete_many: job ids, attempts and outputs (when given) must be arrays of equal length, got "%", "%" and "%"',
            coalesce(cardinality(p_job_ids)::text, 'NULL'), coalesce(cardinality(p_attempts)::text, 'NULL'),
            coalesce(cardinality(p_outputs)::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A scoped caller completes only jobs of its queues: another queue's
    -- job is left alone and not returned, as an unknown id is
    -- (docs/adr/0058-queue-scope-fails-closed.md).
    v_scope := backoff._work_scope();
    -- A success closes its queue's breaker if it is half open
    -- (docs/adr/0045): backoff.queue_breakers is probed once per call for
    -- the distinct queues of the batch, in the same statement.
    --
    -- Each job moves to the finished partition: its live row deleted and the
    -- finished one inserted in one statement (into the finished partition by
    -- its name, as backoff._move_finished), its dedupe key released
    -- (docs/adr/0061). The rows are looked for in the current segment, the
    -- others pruned, as in backoff.complete. When fewer jobs than ids were
    -- completed, the live ones among them in other segments are moved into it
    -- and the same statement runs again, and once more: a row backoff.rotate
    -- moved while a statement waited for it is gone from that statement's
    -- snapshot and found by the next; rows already completed are no longer
    -- running.
    FOR v_try IN 1..3 LOOP
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            USING unnest(p_job_ids, p_attempts) AS t(id, attempt)
            WHERE j.id = ANY (p_job_ids)
              AND j.segment = backoff._current_segment()
              AND j.id = t.id
              AND j.attempts = t.attempt
              AND j.status = 'running'
              AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
            RETURNING j.*
        ), k AS (
            DELETE FROM backoff.dedupe_keys AS k
            -- Arrays, so that the primary key finds the few keys (with
            -- enable_nestloop off a join would hash a scan of every key).
            WHERE k.queue = ANY (ARRAY(SELECT d.queue FROM d WHERE d.dedupe_key IS NOT NULL))
              AND k.dedupe_key = ANY (ARRAY(SELECT d.dedupe_key FROM d WHERE d.dedupe_key IS NOT NULL))
              AND k.job_id = ANY (ARRAY(SELECT d.id FROM d WHERE d.dedupe_key IS NOT NULL))
        ), done AS (
            INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                                    lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                                    dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                                    lease_expiries, schedule, schedule_slot, segment)
            OVERRIDING SYSTEM VALUE
            SELECT d.id, d.queue, d.payload, 'completed', d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
                   NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error, d.errors,
                   d.dead_letter_reason, d.dedupe_key, d.created_at, p_now, d.uncounted_attempts,
                   d.lease_expiries, d.schedule, d.schedule_slot, 0
            FROM d
            RETURNING j.id, j.queue
        ), closed AS (
            UPDATE backoff.queue_breakers AS b
            SET opened_at = NULL, half_open_at = NULL, probes_left = NULL, probe_ids = NULL, counted_from = p_now
            -- An array, so that the primary key finds the rows (with
            -- enable_nestloop off an IN would hash a scan of every breaker).
            WHERE b.queue = ANY (ARRAY(SELECT DISTINCT d.queue FROM done AS d))
              AND b.half_open_at <= p_now
        )
        SELECT array_agg(d.id), array_agg(d.queue) INTO v_ids, v_qs FROM done AS d;
        v_n := coalesce(cardinality(v_ids), 0);
        IF v_n > 0 THEN
            v_done := v_done || v_ids;
            v_doneq := v_doneq || v_qs;
            RETURN QUERY SELECT unnest(v_ids);
        END IF;
        v_total := v_total + v_n;
        EXIT WHEN v_total >= cardinality(p_job_ids) OR v_try = 3;
        PERFORM backoff._move_to_current_segment(p_job_ids);
    END LOOP;
    IF v_total = 0 THEN
        RETURN;
    END IF;
    -- Outputs of the jobs completed (an entry whose fencing failed records
    -- nothing), then their dependents (docs/adr/0087), probed once for the
    -- batch.
    IF p_outputs IS NOT NULL THEN
        SELECT array_agg(c.id), array_agg(c.queue), array_agg(t.output) INTO v_ids, v_qs, p_outputs
        FROM unnest(v_done, v_doneq) AS c(id, queue)
        JOIN unnest(p_job_ids, p_outputs) AS t(id, output) ON t.id = c.id
        WHERE t.output IS NOT NULL;
        IF v_ids IS NOT NULL THEN
            PERFORM backoff._record_outputs(v_ids, v_qs, p_outputs, p_now);
        END IF;
    END IF;
    -- First whether any edge exists at all (one index entry read), so that
    -- a batch of thousands costs no look-up per id where no workflow runs.
    IF EXISTS (SELECT FROM backoff.job_dependencies AS d)
       AND EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = ANY (v_done)) THEN
        PERFORM backoff._settle_dependents(v_done, 'completed', p_now);
    END IF;
    -- Those someone awaits (backoff.await_job): the same one read first.
    IF EXISTS (SELECT FROM backoff.job_awaiters AS a) THEN
        PERFORM backoff._notify_awaiters(v_done);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.complete_many(bigint[], integer[], timestamptz, jsonb[]) IS
'Complete a batch in one statement: p_job_ids[i] is completed if it is running attempt p_attempts[i] (completed_at = p_now, lease and locked_by cleared), recording p_outputs[i] as its result when given (NULL array or element = none; each at most its queue''s max_output_bytes, as for backoff.complete). The jobs that depend on the completed ones are settled in the same transaction (docs/workflows.md). Returns the ids it completed; an entry whose fencing fails (stale attempt, finished, unknown, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on) is left untouched and not returned. The fast path for workers that claim in batches. A completed job of a queue whose circuit breaker is half open closes the breaker.
Errors: 22023 for NULL arrays, arrays of different lengths, an output over its queue''s max_output_bytes (naming its size and the limit), a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 3);
SELECT * FROM backoff.complete_many(ARRAY[1, 2, 3], ARRAY[1, 1, 2]);  -- job 3 ran attempt 1, not 2';

-- backoff._breaker_failure(queue, failures, window, cooldown, now): count a
-- failed attempt of a queue with a circuit breaker (docs/adr/0045).
-- Private; called by fail, only for a retryable failure (a job refused as
-- bad input says nothing about the downstream, docs/adr/0059) of a queue
-- whose breaker_failures is set.
--   closed    -> one row appended to backoff.queue_failures (no row is
--                updated), then the failures in (now - window, now] since
--                the last transition are counted through the index, at most
--                p_failures of them; at the threshold the breaker opens
--                (backoff.queue_breakers: opened_at = now, half open from
--                now + cooldown). Two expired log rows are deleted per
--                append, so the log holds about one window of failures.
--   open      -> nothing: the outage is already counted (attempts that
--                were running when it opened still fail).
--   half open -> reopens (opened_at = now): the probe failed.
-- Concurrent fails do not see each other's uncommitted rows, so the
-- breaker may open a few failures late (at most one per concurrent fail);
-- never early. Transitions are guarded on the state they saw, so two
-- concurrent transitions make one. A fail never waits for a row lock: it
-- takes the state row FOR UPDATE SKIP LOCKED before a transition, and a
-- row another transaction holds means that one is changing the state (a
-- half-open reopen that finds a probe-handing claim there logs the
-- failure, which that claim's successor turns into the reopen).
CREATE OR REPLACE FUNCTION backoff._breaker_failure(
    p_queue    text,
    p_failures integer,
    p_window   interval,
    p_cooldown interval,
    p_now      timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_state backoff.queue_breakers;
    v_from  timestamptz;
    v_count bigint;
    v_found boolean;
BEGIN
    SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
    v_found := FOUND;
    IF v_state.opened_at IS NOT NULL THEN
        IF p_now >= v_state.half_open_at THEN
            -- Half open: reopen, under the row's lock, if it is free and
            -- still the period this fail saw. A row another transaction
            -- holds is not waited for: a fail reopening it, a complete
            -- closing it, or a claim handing out probes. For the last
            -- one, the failure is logged instead, and the next half-open
            -- claim reopens the breaker from it (backoff._claim_controlled).
            PERFORM FROM backoff.queue_breakers AS b
            WHERE b.queue = p_queue AND b.opened_at = v_state.opened_at
            FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE backoff.queue_breakers AS b
                SET opened_at = p_now,
                    half_open_at = backoff._clamp_time(p_now + p_cooldown),
                    probes_left = NULL,
                    probe_ids = NULL,
                    counted_from = p_now
                WHERE b.queue = p_queue;
            ELSE
                INSERT INTO backoff.queue_failures (queue, failed_at) VALUES (p_queue, p_now);
            END IF;
        END IF;
        RETURN;
    END IF;

    INSERT INTO backoff.queue_failures (queue, failed_at) VALUES (p_queue, p_now);
    -- greatest ignores NULL: no state row yet counts the whole window.
    v_from := greatest(p_now - p_window, v_state.counted_from);
    SELECT count(*) INTO v_count
    FROM (SELECT FROM backoff.queue_failures AS f
          WHERE f.queue = p_queue AND f.failed_at > v_from AND f.failed_at <= p_now
          LIMIT p_failures) AS w;
    -- At the threshold, open it: one transition, made by the fail that
    -- gets the row (or, for a queue whose breaker never opened, the right
    -- to create it) without waiting; concurrent fails at the threshold
    -- skip it, so none of them queues behind the opener's commit.
    IF v_count >= p_failures THEN
        IF v_found THEN
            PERFORM FROM backoff.queue_breakers AS b
            WHERE b.queue = p_queue AND b.opened_at IS NULL
            FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE backoff.queue_breakers AS b
                SET opened_at = p_now,
                    half_open_at = backoff._clamp_time(p_now + p_cooldown),
                    probes_left = NULL,
                    probe_ids = NULL,
                    counted_from = p_now
                WHERE b.queue = p_queue;
            END IF;
        ELSIF pg_catalog.pg_try_advisory_xact_lock(
                  pg_catalog.hashtext('backoff.queue_breakers'), pg_catalog.hashtext(p_queue)) THEN
            -- Only fails create the row, each under this lock, so the
            -- INSERT never waits for another's uncommitted one; a row
            -- committed meanwhile is an open breaker (DO NOTHING).
            INSERT INTO backoff.queue_breakers (queue, opened_at, half_open_at, probes_left, counted_from)
            VALUES (p_queue, p_now, backoff._clamp_time(p_now + p_cooldown), NULL, p_now)
            ON CONFLICT (queue) DO NOTHING;
        END IF;
    END IF;
    -- Prune: rows that no longer count, oldest first, skipping rows another
    -- fail is deleting (never waits).
    DELETE FROM backoff.queue_failures AS f
    WHERE f.ctid = ANY (ARRAY(
        SELECT o.ctid
        FROM backoff.queue_failures AS o
        WHERE o.queue = p_queue AND o.failed_at <= v_from
        ORDER BY o.failed_at
        LIMIT 2
        FOR UPDATE SKIP LOCKED));
END
$$;

-- backoff.fail(job id, attempt, error, retry_in, retryable, now): settle a
-- failed running attempt with ONE guarded UPDATE whose new status, run_at,
-- reason and completed_at come from backoff._retry_decision, the same
-- decision reap uses; a dead letter then moves to the finished partition. The error path reads the row only when the UPDATE
-- matched nothing (backoff._raise_fencing_error).
CREATE OR REPLACE FUNCTION backoff.fail(
    p_job_id    bigint,
    p_attempt   integer,
    p_error     text,
    p_retry_in  interval DEFAULT NULL,
    p_retryable boolean DEFAULT true,
    p_now       timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only, as backoff.complete: a custom plan is planned again
-- at each call, and planning locks every index of every segment.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job   backoff.jobs;
    -- Capped at 8 KiB with a marker (ADR 0039).
    v_error text := backoff._error_text(p_error);
    v_failures integer;
    v_window   interval;
    v_cooldown interval;
    v_found    boolean;
BEGIN
    IF p_error IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": error must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retry_in < interval '0' THEN
        RAISE EXCEPTION 'cannot fail job "%": retry_in must not be negative, got "%"', coalesce(p_job_id::text, 'NULL'), p_retry_in
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_retryable IS NULL THEN
        RAISE EXCEPTION 'cannot fail job "%": retryable must not be null', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    -- In the current segment; a job not found there is moved into it and
    -- looked for again, and once more, as in backoff.complete.
    FOR v_try IN 1..3 LOOP
        UPDATE backoff.jobs AS j
        SET (status, run_at, dead_letter_reason, completed_at) = (
                -- The policy is looked up once (OFFSET 0 keeps it a column: the
                -- inlined decision would otherwise look it up for every field
                -- it reads), and so is its capped delay for the counted attempt
                -- (one _clamped_power call at most). The job's recorded policy
                -- is one primary-key look-up, as in backoff.claim;
                -- backoff._job_policy, a PL/pgSQL call, only when that row is
                -- gone.
                SELECT d.status, d.run_at, d.dead_letter_reason, d.completed_at
                FROM (SELECT coalesce((SELECT p FROM backoff.policies AS p WHERE p.name = j.policy),
                                      backoff._job_policy(j.policy, j.queue)) AS policy_row
                      OFFSET 0) AS p
                CROSS JOIN LATERAL (
                    SELECT backoff._policy_capped_us(p.policy_row, j.attempts - j.uncounted_attempts) AS capped_us OFFSET 0) AS c
                CROSS JOIN LATERAL backoff._retry_decision(
                    p.policy_row, c.capped_us, j.id, j.attempts - j.uncounted_attempts, j.max_attempts, j.lease_expiries,
                    j.created_at, j.run_at, p_retry_in, p_retryable, p_now) AS d),
            lease_until = NULL,
            locked_by = NULL,
            last_failed_at = p_now,
            last_error = v_error,
            errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now, v_error, j.locked_by, 'error', j.last_attempted_at)
        WHERE j.id = p_job_id
          AND j.segment = backoff._current_segment()
          AND j.status = 'running'
          AND j.attempts = p_attempt
        RETURNING j.* INTO v_job;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF v_found THEN
        -- A dead letter goes to the finished partition (docs/adr/0061).
        IF v_job.status <> 'retrying' AND v_job.segment <> 0 THEN
            SELECT * INTO v_job FROM backoff._move_finished(ARRAY[v_job.id]);
        END IF;
        -- Another queue's job looks missing; the error undoes the UPDATE.
        IF backoff._scope_in_force() THEN
            PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
        END IF;
        -- A dead letter settles the jobs that depend on it, by each edge's
        -- policy (docs/adr/0087).
        IF v_job.status = 'dead_lettered'
           AND EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id) THEN
            PERFORM backoff._settle_dependents(ARRAY[p_job_id], 'dead_lettered', p_now);
        END IF;
        -- And tells those who await it (backoff.await_job).
        IF v_job.status = 'dead_lettered'
           AND EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id) THEN
            PERFORM backoff._notify_awaiters(ARRAY[p_job_id]);
        END IF;
        -- The queue's circuit breaker counts retryable failures only
        -- (docs/adr/0059): a job refused as bad input says nothing about the
        -- downstream, and counting it let any producer hold the breaker
        -- open. One primary-key probe of backoff.queues when it has none.
        SELECT q.breaker_failures, q.breaker_window, q.breaker_cooldown
        INTO v_failures, v_window, v_cooldown
        FROM backoff.queues AS q
        WHERE q.name = v_job.queue AND q.breaker_failures IS NOT NULL AND p_retryable;
        IF FOUND THEN
            PERFORM backoff._breaker_failure(v_job.queue, v_failures, v_window, v_cooldown, p_now);
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('fail', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.fail(bigint, integer, text, interval, boolean, timestamptz) IS
'Report that running attempt p_attempt of job p_job_id failed with p_error. One guarded UPDATE decides: not p_retryable -> dead_lettered (reason non_retryable); the job''s lease_expiries >= the policy''s max_lease_expiries -> dead_lettered (lease_expiries); the counted attempt (attempts - uncounted_attempts: claims given back by snooze or before a replay do not count) >= max_attempts (the job''s, else its policy''s) -> dead_lettered (max_attempts); next run after created_at + the policy deadline -> dead_lettered (deadline); otherwise retrying at p_now + (p_retry_in clamped to the policy max, else the policy delay for the counted attempt seeded by the job id). Dead letters get completed_at = p_now, and settle the jobs that depend on this one by each edge''s policy (docs/workflows.md). A retryable fail counts toward the queue''s circuit breaker, if it has one (backoff.queues.breaker_failures): it may open the breaker, and it reopens a half-open one; a fail with p_retryable false (bad input) does not count, and a half-open breaker whose probe fails so hands out another. Lease and locked_by are cleared, last_failed_at = p_now, last_error = p_error (texts over 8 KiB are cut, ending with '' [truncated: N bytes]''), and {attempt (the token p_attempt), counted, at, error, worker, kind: error, started: when the attempt was claimed (last_attempted_at)} is appended to errors (the 20 most recent are kept). reap takes the same decision. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id, attempt, error or retryable, an attempt < 1, a negative retry_in, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, attempts - uncounted_attempts AS counted, run_at - now() AS retry_in, last_error FROM backoff.fail(1, 1, ''smtp timeout'');';

-- backoff.reap(now, limit): move running jobs whose lease expired through
-- backoff._retry_decision, the same decision fail uses, as retryable
-- failures with message 'lease expired' and kind 'lease_expired'. Each
-- counts in the job's lease_expiries, which the policy's
-- max_lease_expiries bounds (docs/adr/0046); a lease expiry does not count
-- toward the queue's circuit breaker (docs/adr/0045). One
-- set-based UPDATE per batch (docs/adr/0041): each distinct (policy, queue)
-- of the batch is looked up once, its delay before jitter computed once
-- per distinct counted attempt (docs/adr/0052), and the decision is
-- inlined, so a row costs no PL/pgSQL call (only md5 for the jitter of a
-- retried job). The batch is locked with FOR UPDATE SKIP LOCKED, so any number of
-- reapers can run at once without waiting for one another or settling a job
-- twice. The outer UPDATE does not repeat the conditions: the rows are
-- locked by the batch, which rechecked them on their latest version, and a
-- repeated "lease_until < p_now" would let the planner walk the lease index
-- instead of probing the primary key.
CREATE OR REPLACE FUNCTION backoff.reap(
    p_now   timestamptz DEFAULT now(),
    p_limit integer DEFAULT 1000
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- One generic plan, as the other settling calls (docs/adr/0041): its shape
-- is the custom plan's (the ordered walk of the lease indexes), and a custom
-- plan was planned again at every call, about 3,500 instructions per job
-- reaped.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_count integer;
    v_dead  bigint[];
    -- A caller scoped by backoff.grant_queue reaps its 'work' queues only.
    v_scope text[] := backoff._queue_scope('work');
BEGIN
    p_now := backoff._now(p_now);
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'reap: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The batch is locked first (FOR UPDATE SKIP LOCKED returns each row as
    -- its latest version, which nobody can change until we commit), its
    -- distinct (policy, queue) pairs are resolved once each, and the
    -- decision, inlined, is taken per row from the locked values. The UPDATE
    -- then finds each row through the primary key (j.id = d.id; the batch is
    -- estimated small, so a nested loop of primary-key probes). It once also
    -- said "j.id = ANY (the batch's ids)": with the decision's join
    -- estimated at one row the planner put that array into the inner index
    -- scan, which sorted the whole array again for every row (quadratic: 5x
    -- the instructions per row at batches of 1,000; the plan test checks).
    WITH batch AS MATERIALIZED (
        SELECT r.id, r.queue, r.policy, r.attempts, r.uncounted_attempts, r.max_attempts, r.lease_expiries,
               r.created_at, r.run_at, r.segment
        FROM backoff.jobs AS r
        -- Only running jobs have a lease (every function keeps it so, ADR 0084).
        -- Adding "status = 'running'" would make the planner expect one row
        -- and prefer a bitmap scan plus a sort of every expired lease to
        -- this ordered walk of jobs_lease_idx that stops at p_limit.
        WHERE r.lease_until < p_now
          AND (v_scope IS NULL OR r.queue LIKE ANY (v_scope))
        ORDER BY r.lease_until
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), batch_policy AS MATERIALIZED (
        SELECT k.queue, k.policy, backoff._job_policy(k.policy, k.queue) AS policy_row
        FROM (SELECT DISTINCT b.queue, b.policy FROM batch AS b) AS k
    ), batch_delay AS MATERIALIZED (
        -- The policy's capped delay before jitter depends on the policy and
        -- the counted attempt only: computed once per distinct pair here
        -- (docs/adr/0052), the job's jitter is added by the decision.
        SELECT k.queue, k.policy, k.counted, p.policy_row,
               backoff._policy_capped_us(p.policy_row, k.counted) AS capped_us
        FROM (SELECT DISTINCT b.queue, b.policy, b.attempts - b.uncounted_attempts AS counted FROM batch AS b) AS k
        JOIN batch_policy AS p ON p.queue = k.queue AND p.policy IS NOT DISTINCT FROM k.policy
    ), decided AS (
        SELECT b.id, b.segment, d.status, d.run_at, d.dead_letter_reason, d.completed_at
        FROM batch AS b
        JOIN batch_delay AS p ON p.queue = b.queue AND p.policy IS NOT DISTINCT FROM b.policy
                             AND p.counted = b.attempts - b.uncounted_attempts
        CROSS JOIN LATERAL backoff._retry_decision(
            p.policy_row, p.capped_us, b.id, p.counted, b.max_attempts, b.lease_expiries + 1,
            b.created_at, b.run_at, NULL, true, p_now) AS d
    ), settled AS (
        UPDATE backoff.jobs AS j
        SET status = d.status,
            run_at = d.run_at,
            dead_letter_reason = d.dead_letter_reason,
            completed_at = d.completed_at,
            lease_expiries = j.lease_expiries + 1,
            lease_until = NULL,
            locked_by = NULL,
            last_failed_at = p_now,
            last_error = 'lease expired',
            errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now, 'lease expired', j.locked_by, 'lease_expired', j.last_attempted_at)
        FROM decided AS d
        -- The segment the batch locked the row in: each row's look-up then
        -- probes that segment's primary key only, the others pruned as the
        -- join runs (a row locked by the batch cannot move before commit).
        WHERE j.id = d.id
          AND j.segment = d.segment
        RETURNING j.id, j.status, j.segment
    )
    SELECT count(*), pg_catalog.array_agg(s.id) FILTER (WHERE s.status <> 'retrying' AND s.segment <> 0)
    INTO v_count, v_dead
    FROM settled AS s;
    -- Dead letters go to the finished partition (docs/adr/0061); the
    -- batch's rows are locked by this transaction, so none has moved.
    IF v_dead IS NOT NULL THEN
        PERFORM FROM backoff._move_finished(v_dead);
        -- Dead letters settle the jobs that depend on them (docs/adr/0087).
        IF EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = ANY (v_dead)) THEN
            PERFORM backoff._settle_dependents(v_dead, 'dead_lettered', p_now);
        END IF;
        IF EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = ANY (v_dead)) THEN
            PERFORM backoff._notify_awaiters(v_dead);
        END IF;
    END IF;
    -- That a reap ran, for backoff.liveness (at most a write every 15 s).
    PERFORM backoff._note_maintenance('reap', NULL, p_now);
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.reap(timestamptz, integer) IS
'Settle up to p_limit running jobs whose lease expired (lease_until < p_now) as failed attempts, through the same decision as fail (retryable, no requested delay), with lease_expiries + 1: retrying at the policy''s next delay, or dead_lettered (lease_expiries when the count reaches the policy''s max_lease_expiries, else max_attempts or deadline). Lease expiries do not count toward the queue''s circuit breaker. last_error = ''lease expired'', and the history entry has kind lease_expired, the expired attempt (its token) and counted attempt, the worker that held the lease, and started: when that attempt was claimed (last_attempted_at), so the stuck interval is [started, at]. Returns how many jobs it moved. Safe to run from many places at once: each batch is locked with FOR UPDATE SKIP LOCKED. Each call is recorded for backoff.liveness (reap_at; written at most once every 15 seconds). A caller scoped by backoff.grant_queue reaps only the queues it may work on.
Errors: 22023 for a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT backoff.reap(p_now => now() + interval ''1 minute'') AS reaped;';

-- backoff.rotate(now): the maintenance of the live segments (docs/adr/0061),
-- called beside reap (the Workers' maintenance loop, backoff.maintain). Each call:
-- 1. Switch: when the current segment has taken backoff.settings.segment_jobs
--    jobs (counted from the id sequence) and at least as many as there are
--    live jobs, the next segment that is empty on disk becomes current
--    (backoff._next_segment; when none is, because a transaction that read
--    backoff.jobs holds off their truncate, a new one is added, up to
--    v_max_segments: docs/adr/0082). "At least the live jobs" keeps the
--    rows moved below at no more than one per job enqueued, whatever the
--    backlog.
-- 2. Move: the rows left in the other live segments (and a live row an
--    admin inserted into segment 0) go to the current segment, a finished
--    one to segment 0 (backoff._move_to_current_segment and
--    backoff._move_finished), locked first with FOR UPDATE SKIP LOCKED: a
--    row a claimer or a completer holds is left for the next call, nobody
--    waits for rotate. A by-id call that waited for a row rotate moved runs
--    its statement once more and finds it.
-- 3. Truncate: a segment that was not current when the call began and holds
--    no row is truncated, under a lock_timeout of 50 ms: TRUNCATE drops its
--    dead row versions and index entries whatever snapshot is open, which
--    vacuum cannot. While the LOCK waits, new statements on that segment
--    queue behind it, so the timeout is the longest stall it may cause; a
--    transaction that has read backoff.jobs holds a lock until it ends, and
--    the truncate is then tried again at the next call. The segments left
--    most recently are tried first, and the first lock not granted ends
--    the tries of the call: the older ones are those such a transaction
--    holds, and each try would stall their statements again. Only at READ
--    COMMITTED: see below.
-- One call at a time: a call that finds another one running does nothing.
-- Each call is recorded for backoff.liveness (docs/adr/0079), with the
-- worker that names itself in p_worker (the Workers do, beside each reap,
-- busy or idle: what "workers seen" counts); a truncate too.
CREATE OR REPLACE FUNCTION backoff.rotate(
    p_now    timestamptz DEFAULT now(),
    p_worker text DEFAULT NULL
)
RETURNS TABLE (current_segment smallint, switched_from smallint, moved bigint, truncated smallint[], note text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cur     smallint;
    v_first   bigint;
    v_last    bigint;
    v_limit   bigint;
    v_live    bigint;
    v_seg     smallint;
    v_n       bigint;
    v_batch   constant integer := 5000;
    v_was     smallint[];
    v_ids     bigint[];
    v_timeout text;
    -- At most this many live segments (docs/adr/0082): three for the ring,
    -- the rest for the time a reader holds them.
    v_max_segments constant integer := 8;
    v_switch  record;
BEGIN
    p_now := backoff._now(p_now);
    IF p_worker IS NOT NULL THEN
        p_worker := backoff._check_name('worker', p_worker);
    END IF;
    PERFORM backoff._note_maintenance('rotate', p_worker, p_now);
    moved := 0;
    truncated := '{}';
    SELECT s.segment, s.first_id INTO v_cur, v_first
    FROM backoff.segments AS s
    WHERE s.current
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        current_segment := (SELECT s.segment FROM backoff.segments AS s WHERE s.current);
        note := 'another rotate is running';
        RETURN NEXT;
        RETURN;
    END IF;
    -- The segments left most recently first (step 3).
    v_was := ARRAY(SELECT s.segment FROM backoff.segments AS s WHERE NOT s.current
                   ORDER BY s.switched_at DESC, s.segment);

    -- 1. Switch.
    v_last := coalesce(pg_catalog.pg_sequence_last_value('backoff.jobs_id_seq'::pg_catalog.regclass), 0);
    SELECT coalesce((SELECT st.segment_jobs FROM backoff.settings AS st LIMIT 1), 5000) INTO v_limit;
    IF v_last - v_first >= v_limit THEN
        SELECT count(*) INTO v_live
        FROM (SELECT FROM backoff.jobs AS j WHERE j.segment > 0 LIMIT v_last - v_first + 1) AS l;
        IF v_live > v_last - v_first THEN
            note := pg_catalog.format('segment %s keeps taking jobs: more jobs are live than the %s it has taken',
                                      v_cur, v_last - v_first);
        ELSE
            SELECT * INTO v_switch FROM backoff._next_segment(v_cur, v_max_segments);
            IF v_switch.segment IS NULL THEN
                note := pg_catalog.format('segment %s keeps taking jobs: %s', v_cur, v_switch.note);
            ELSE
                note := v_switch.note;
                IF v_switch.added THEN
                    INSERT INTO backoff.segments (segment, current, first_id, switched_at)
                    VALUES (v_switch.segment, false, v_last, p_now);
                END IF;
                UPDATE backoff.segments AS s SET current = false WHERE s.segment = v_cur;
                UPDATE backoff.segments AS s SET current = true, first_id = v_last, switched_at = p_now
                WHERE s.segment = v_switch.segment;
                switched_from := v_cur;
                v_cur := v_switch.segment;
            END IF;
        END IF;
    END IF;
    current_segment := v_cur;
    -- Publish the switch to the statements that prune by it, in this
    -- transaction; and again if the two ever disagree (a restore that wrote
    -- backoff.segments).
    IF backoff._current_segment() IS DISTINCT FROM v_cur THEN
        PERFORM backoff._publish_current_segment(v_cur);
    END IF;

    -- 2. Move what is left behind, in batches.
    FOR v_seg IN SELECT 0::smallint UNION ALL (SELECT s.segment FROM backoff.segments AS s WHERE s.segment <> v_cur ORDER BY 1) LOOP
        LOOP
            -- Locked here, skipping rows others hold; moved by the calls'
            -- own moves (the live ones as the by-id calls move a job they
            -- find elsewhere, the finished ones as fail and reap
            -- move a dead letter), which find them locked by this
            -- transaction and wait for nobody.
            IF v_seg = 0 THEN
                -- Segment 0: its live rows only, found through the claim
                -- and lease indexes. A statement of its own, whose
                -- conditions are constants: one statement for every
                -- segment has a generic plan that cannot use those partial
                -- indexes and reads the whole finished partition.
                v_ids := ARRAY(
                    SELECT c.id FROM backoff.jobs AS c
                    WHERE c.segment = 0
                      AND (c.status IN ('pending', 'retrying') OR c.lease_until IS NOT NULL)
                    LIMIT v_batch
                    FOR UPDATE SKIP LOCKED);
            ELSE
                v_ids := ARRAY(
                    SELECT c.id FROM backoff.jobs AS c
                    WHERE c.segment = v_seg
                    LIMIT v_batch
                    FOR UPDATE SKIP LOCKED);
            END IF;
            v_n := cardinality(v_ids);
            IF v_n > 0 THEN
                moved := moved + backoff._move_to_current_segment(v_ids);
                IF v_seg <> 0 THEN
                    moved := moved + (SELECT count(*) FROM backoff._move_finished(v_ids));
                END IF;
            END IF;
            EXIT WHEN v_n < v_batch;
        END LOOP;
    END LOOP;

    -- 3. Truncate the segments that were not current when the call began
    -- (enqueues may still be inserting into the one it switched from) and
    -- hold no row, unless already empty on disk.
    v_timeout := pg_catalog.current_setting('lock_timeout');
    FOREACH v_seg IN ARRAY v_was LOOP
        CONTINUE WHEN v_seg = v_cur
            OR pg_catalog.pg_relation_size(pg_catalog.format('backoff.jobs_live_%s', v_seg)::pg_catalog.regclass) = 0;
        -- "Empty" is decided by a snapshot taken after the lock, which only
        -- READ COMMITTED takes: under REPEATABLE READ or SERIALIZABLE the
        -- transaction's snapshot is older than the lock, and a job
        -- committed in between would be invisible to it, and truncated.
        IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
            note := pg_catalog.concat_ws('; ', note,
                pg_catalog.format('segment %s not truncated: rotate truncates only at READ COMMITTED, and this transaction is %s',
                                  v_seg, pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))));
            CONTINUE;
        END IF;
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
            EXECUTE pg_catalog.format('LOCK TABLE backoff.%I IN ACCESS EXCLUSIVE MODE', 'jobs_live_' || v_seg);
            PERFORM pg_catalog.set_config('lock_timeout', v_timeout, true);
            -- Under the lock, with a new snapshot (READ COMMITTED, above):
            -- every writer that held the segment has ended, and what it
            -- committed is seen.
            IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.segment = v_seg) THEN
                note := pg_catalog.concat_ws('; ', note,
                    pg_catalog.format('segment %s not truncated: it still holds rows that others had locked', v_seg));
            ELSE
                EXECUTE pg_catalog.format('TRUNCATE backoff.%I', 'jobs_live_' || v_seg);
                truncated := truncated || v_seg;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            note := pg_catalog.concat_ws('; ', note,
                pg_catalog.format('segment %s not truncated: its lock was not granted within 50 ms (a transaction that read backoff.jobs holds it until it ends), nor tried are the segments left before it', v_seg));
            EXIT;
        END;
    END LOOP;
    IF cardinality(truncated) > 0 THEN
        PERFORM backoff._note_maintenance('truncate', NULL, p_now);
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.rotate(timestamptz, text) IS
'Maintain the live segments of backoff.jobs (docs/adr/0061); call it beside reap, e.g. once a second (the Go Worker does, as does the pg_cron schedule of backoffctl cron install). When the current segment has taken backoff.settings.segment_jobs jobs (5,000 by default) and at least as many as there are live jobs, the next segment that is empty on disk becomes current (switched_from names the old one); when none is, because a transaction that read backoff.jobs holds the others, a segment is added (up to 8 in all, docs/adr/0082) and note says so. Rows left in the other segments are moved, the live ones to the current segment and the finished ones to segment 0, skipping rows other transactions hold (moved counts them). A segment that was not current when the call began and holds no row is truncated (truncated lists them), under a lock_timeout of 50 ms and only at READ COMMITTED (a REPEATABLE READ or SERIALIZABLE snapshot is older than the lock and could miss a job committed meanwhile: there the call switches and moves, truncates nothing and says so in note; run it at READ COMMITTED, e.g. BEGIN ISOLATION LEVEL READ COMMITTED; SELECT backoff.rotate(); COMMIT, in a database whose default is another level); when the lock is not granted in time (a transaction that read backoff.jobs holds it until it ends), note says so, the segments left before it are not tried in that call, and the next call tries again. One call at a time: a call while another runs does nothing and says so. Each call is recorded for backoff.liveness (rotate_at, at most once every 15 seconds; truncate_at when it truncated), and p_worker (NULL: none), the caller''s worker name, counts that worker as seen (workers_seen): the Go, Python and TypeScript Workers pass theirs. Returns one row: current_segment, switched_from, moved, truncated, note.
Errors: 22023 for a p_worker that is not 1 to 128 bytes without control characters, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT current_segment, switched_from, moved, truncated, note FROM backoff.rotate();
SELECT moved FROM backoff.rotate(p_worker => ''worker-1'');';

-- backoff.heartbeat(job id, attempt, extend, now, progress): extend the
-- lease of a running attempt, and record its progress when one is given
-- (backoff.job_progress, beside the job row: one more statement, no more
-- round trips). One guarded UPDATE; errors chosen only after it matched
-- nothing.
CREATE OR REPLACE FUNCTION backoff.heartbeat(
    p_job_id  bigint,
    p_attempt integer,
    p_extend  interval DEFAULT NULL,
    p_now     timestamptz DEFAULT now(),
    p_progress jsonb DEFAULT NULL
)
RETURNS timestamptz
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_lease_until timestamptz;
    v_queue       text;
    v_found       boolean;
BEGIN
    IF p_extend <= interval '0' OR NOT backoff._valid_span(p_extend) THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": extend must be positive and at most 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), p_extend
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Progress is a small status document (a percentage, a step, a
    -- count), written at every heartbeat: bounded so that it stays cheap.
    IF pg_catalog.pg_column_size(p_progress) > 8192 THEN
        RAISE EXCEPTION 'cannot heartbeat job "%": progress is % bytes, over 8192 bytes',
            coalesce(p_job_id::text, 'NULL'), pg_catalog.pg_column_size(p_progress)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- In the current segment; a job not found there is moved into it and
    -- looked for again, and once more, as in backoff.complete
    -- (docs/adr/0061).
    FOR v_try IN 1..3 LOOP
        UPDATE backoff.jobs AS j
        -- The lease of the job's recorded policy, one primary-key look-up;
        -- backoff._job_policy, a PL/pgSQL call, only when that row is gone
        -- (as in backoff.claim).
        SET lease_until = backoff._clamp_time(p_now + coalesce(
                p_extend,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease))
        WHERE j.id = p_job_id
          AND j.segment = backoff._current_segment()
          AND j.status = 'running'
          AND j.attempts = p_attempt
        RETURNING j.lease_until, j.queue INTO v_lease_until, v_queue;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF v_found THEN
        -- Another queue's job looks missing; the error undoes the UPDATE.
        IF backoff._scope_in_force() THEN
            PERFORM backoff._check_job_scope(p_job_id, v_queue);
        END IF;
        IF p_progress IS NOT NULL THEN
            INSERT INTO backoff.job_progress AS g (job_id, attempt, progress, reported_at)
            VALUES (p_job_id, p_attempt, p_progress, p_now)
            ON CONFLICT (job_id) DO UPDATE
            SET attempt = excluded.attempt, progress = excluded.progress, reported_at = excluded.reported_at;
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('heartbeat', p_job_id, p_attempt);
    END IF;
    RETURN v_lease_until;
END
$$;

COMMENT ON FUNCTION backoff.heartbeat(bigint, integer, interval, timestamptz, jsonb) IS
'Extend the lease of running attempt p_attempt of job p_job_id to p_now + p_extend (the policy lease when NULL); returns the new lease_until. p_progress (jsonb, at most 8 KiB; NULL = leave the last one; pass it by name) is recorded as the job''s progress with the attempt and p_now, replacing the previous one; backoff.job_detail shows it. A lease that expired but was not reaped yet can still be extended: the attempt number, not the clock, says who holds the job.
Errors: BK002 the job is live but not running this attempt (reaped, re-claimed); BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id or attempt, an attempt < 1, an extend <= 0, a progress over 8 KiB, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''reports'');
SELECT id FROM backoff.claim(''reports'', ''worker-1'');
SELECT backoff.heartbeat(1, 1, ''1 minute'') - now() AS lease_left;
SELECT backoff.heartbeat(1, 1, p_progress => ''{"done": 40, "of": 100}'') IS NOT NULL AS extended;';

-- backoff.snooze(job id, attempt, delay, now): put a running attempt back
-- to pending at p_now + p_delay without spending it: uncounted_attempts
-- goes up by one, so the counted attempt goes back by one while attempts,
-- the fencing token, stays; the next claim has a new token
-- (docs/adr/0020-tokens-that-never-repeat.md). A snooze repeated after its
-- reply was lost is refused (BK002 once the job is pending or re-claimed).
CREATE OR REPLACE FUNCTION backoff.snooze(
    p_job_id  bigint,
    p_attempt integer,
    p_delay   interval,
    p_now     timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only, as the other settling calls (docs/adr/0041): a custom
-- plan is planned again at each call, and planning locks every segment's
-- indexes, so a snooze would queue behind rotate's lock on a segment it
-- truncates.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_job   backoff.jobs;
    v_found boolean;
BEGIN
    IF p_delay IS NULL OR p_delay < interval '0' OR NOT backoff._valid_span(p_delay) THEN
        RAISE EXCEPTION 'cannot snooze job "%": delay must be between 0 and 876600 hours, got "%"',
            coalesce(p_job_id::text, 'NULL'), coalesce(p_delay::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- In the current segment; a job not found there is moved into it and
    -- looked for again, and once more, as in backoff.complete
    -- (docs/adr/0061).
    FOR v_try IN 1..3 LOOP
        UPDATE backoff.jobs AS j
        SET status = 'pending',
            uncounted_attempts = j.uncounted_attempts + 1,
            run_at = backoff._clamp_time(p_now + p_delay),
            lease_until = NULL,
            locked_by = NULL
        WHERE j.id = p_job_id
          AND j.segment = backoff._current_segment()
          AND j.status = 'running'
          AND j.attempts = p_attempt
        RETURNING j.* INTO v_job;
        v_found := FOUND;
        EXIT WHEN v_found OR v_try = 3;
        PERFORM backoff._move_to_current_segment(ARRAY[p_job_id]);
    END LOOP;
    IF v_found THEN
        -- Another queue's job looks missing; the error undoes the UPDATE.
        IF backoff._scope_in_force() THEN
            PERFORM backoff._check_job_scope(p_job_id, v_job.queue);
        END IF;
    ELSE
        PERFORM backoff._raise_fencing_error('snooze', p_job_id, p_attempt);
    END IF;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.snooze(bigint, integer, interval, timestamptz) IS
'Put running attempt p_attempt of job p_job_id back to pending with run_at = p_now + p_delay (at most year 9999), without spending an attempt: uncounted_attempts + 1, so the counted attempt (attempts - uncounted_attempts, what max_attempts bounds) goes back by one. attempts, the fencing token, never goes down: the next claim gets a new token, and a repeated or stale snooze with this one is refused. Lease and locked_by are cleared; no error is recorded. Returns the job.
Errors: BK002 the job is live but not running this attempt; BK003 it is completed, dead_lettered or cancelled; BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on (nothing is changed); 22023 a NULL id, attempt or delay, an attempt < 1, a negative delay, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status, attempts, attempts - uncounted_attempts AS counted, run_at - now() AS runs_in FROM backoff.snooze(1, 1, ''5 minutes'');';

-- backoff.cancel(job id, reason, now): terminal 'cancelled' for a job that
-- is not finished (pending, retrying or running). A running worker learns
-- it at its next complete, fail, heartbeat or snooze (BK003). The cancel
-- is recorded in the job's history, kind 'cancelled', with the role that
-- asked (docs/adr/0066): session_user, the login role, which a SECURITY
-- DEFINER function does not change.
CREATE OR REPLACE FUNCTION backoff.cancel(
    p_job_id bigint,
    p_reason text DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job backoff.jobs;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot cancel job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- One statement moves the job to the finished partition, named as in
    -- backoff._move_finished (docs/adr/0061);
    -- run twice when backoff.rotate moved the row while the first waited.
    FOR v_try IN 1..2 LOOP
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = p_job_id
              AND j.status IN ('pending', 'running', 'retrying', 'blocked')
            RETURNING j.*
        ), k AS (
            DELETE FROM backoff.dedupe_keys AS k
            USING d
            WHERE k.queue = d.queue AND k.dedupe_key = d.dedupe_key AND k.job_id = d.id
        )
        INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'cancelled', d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
               NULL, NULL, d.last_attempted_at, d.last_failed_at,
               coalesce(backoff._error_text(p_reason), d.last_error),
               -- Of a running job, the attempt it stopped (its worker and start).
               backoff._push_error(d.errors, d.attempts, d.attempts - d.uncounted_attempts, p_now,
                                   backoff._error_text(p_reason),
                                   CASE WHEN d.status = 'running' THEN d.locked_by END, 'cancelled',
                                   CASE WHEN d.status = 'running' THEN d.last_attempted_at END,
                                   session_user::text),
               d.dead_letter_reason, d.dedupe_key, d.created_at, p_now, d.uncounted_attempts,
               d.lease_expiries, d.schedule, d.schedule_slot, 0
        FROM d
        RETURNING j.* INTO v_job;
        IF FOUND THEN
            -- Its dependents are settled by each edge's policy
            -- (docs/adr/0087). A blocked job's counter is left to prune:
            -- a parent settling it locks the counter before the job's
            -- row, and taking them here in the other order could deadlock
            -- with it; a counter whose job is no longer blocked releases
            -- nothing.
            IF EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id) THEN
                PERFORM backoff._settle_dependents(ARRAY[p_job_id], 'cancelled', p_now);
            END IF;
            IF EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id) THEN
                PERFORM backoff._notify_awaiters(ARRAY[p_job_id]);
            END IF;
            RETURN v_job;
        END IF;
    END LOOP;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot cancel job "%": it is "%"', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.cancel(bigint, text, timestamptz) IS
'Cancel job p_job_id if it is pending, retrying, running or blocked (waiting for the jobs it depends on): status cancelled (terminal), completed_at = p_now, lease and locked_by cleared, last_error = p_reason when given (capped at 8 KiB like fail''s error text). The cancel is appended to the job''s history (errors, 20 most recent kept): {attempt, counted, at, error: p_reason, kind: cancelled, role: the login role (session_user)}, and of a running job the worker and the attempt''s start (started); it is not a failed attempt (stats, activity and the retry budget do not count it). A worker still running it gets BK003 from complete, fail, heartbeat and snooze. replay brings it back; its next claim has a new token, so that worker gets BK002 then. The jobs that depend on it are settled by each edge''s policy: cancelled in turn (''cancel'', the default, with a reason naming this job), run (''run''), or kept blocked for an operator (''wait''; docs/workflows.md). Returns the job.
Errors: BK003 the job is already completed, dead_lettered or cancelled; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT status, last_error FROM backoff.cancel(1, ''customer deleted'');';

-- backoff.replay(job id, now): a dead-lettered or cancelled job back to
-- pending, due at p_now, with a fresh attempt budget: uncounted_attempts =
-- attempts, so the counted attempt is 0, while attempts, the fencing token,
-- keeps counting (docs/adr/0020-tokens-that-never-repeat.md): a worker
-- still running the cancelled attempt cannot settle the next one. Two
-- concurrent replays of one job: the second waits for the first's row lock,
-- then finds a pending job (BK003). The error history and last_error stay
-- as evidence, and the replay is appended to the history, kind 'replayed',
-- with the role that asked (session_user: docs/adr/0066).
CREATE OR REPLACE FUNCTION backoff.replay(
    p_job_id bigint,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_job        backoff.jobs;
    v_queue      text;
    v_dedupe_key text;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot replay job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- The finished job, locked, so that it stays where it is; its dedupe
    -- key is taken again (backoff.dedupe_keys, docs/adr/0061) unless an
    -- unfinished job holds it.
    SELECT j.queue, j.dedupe_key INTO v_queue, v_dedupe_key
    FROM backoff.jobs AS j
    WHERE j.id = p_job_id
      AND j.status IN ('dead_lettered', 'cancelled')
    FOR UPDATE;
    IF FOUND THEN
        IF v_dedupe_key IS NOT NULL
           AND (SELECT k.held FROM backoff._take_dedupe_key(v_queue, v_dedupe_key, p_job_id) AS k) IS NOT NULL THEN
            RAISE EXCEPTION 'cannot replay job "%": an unfinished job of queue "%" holds its dedupe key "%"',
                p_job_id, v_queue, v_dedupe_key
                USING ERRCODE = 'BK003';
        END IF;
        -- Back to the current segment: the finished row deleted and the
        -- live one inserted in one statement.
        WITH d AS (
            DELETE FROM backoff.jobs AS j
            WHERE j.id = p_job_id
              AND j.status IN ('dead_lettered', 'cancelled')
            RETURNING j.*
        )
        INSERT INTO backoff.jobs AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'pending', d.priority, d.attempts, d.max_attempts, d.policy, p_now,
               NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error,
               backoff._push_error(d.errors, d.attempts, 0, p_now, NULL, NULL, 'replayed', NULL, session_user::text),
               NULL, d.dedupe_key, d.created_at, NULL, d.attempts,
               0, d.schedule, d.schedule_slot, backoff._current_segment()
        FROM d
        RETURNING j.* INTO v_job;
    END IF;
    IF v_job.id IS NOT NULL THEN
        -- Children kept waiting for this job ('wait' edges) wait for its
        -- new run (docs/adr/0087).
        IF EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = p_job_id AND d.state = 'waiting') THEN
            PERFORM backoff._reopen_dependents(ARRAY[p_job_id]);
        END IF;
        PERFORM pg_catalog.pg_notify('backoff_jobs', v_job.queue);
        RETURN v_job;
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    RAISE EXCEPTION 'cannot replay job "%": it is "%", only dead_lettered or cancelled jobs can be replayed', p_job_id, v_job.status
        USING ERRCODE = 'BK003';
END
$$;

COMMENT ON FUNCTION backoff.replay(bigint, timestamptz) IS
'Bring a dead_lettered or cancelled job back: status pending, run_at = p_now, a fresh budget (uncounted_attempts = attempts, so the counted attempt attempts - uncounted_attempts is 0, and lease_expiries = 0), dead_letter_reason and completed_at cleared; errors and last_error are kept as history, and {attempt (the token so far), counted: 0, at: p_now, kind: replayed, role: the login role (session_user)} is appended to errors (20 most recent kept); it is not a failed attempt (stats, activity and the retry budget do not count it). attempts, the fencing token, is kept and the next claim gets attempts + 1, so a worker still running an attempt from before the cancel or dead letter is refused (BK002) on the replayed job. The job keeps its created_at, so a policy deadline still counts from it. The jobs kept blocked by this one''s failure (edges with policy ''wait'') wait for its new run again (docs/workflows.md). Notifies channel backoff_jobs. Returns the job.
Errors: BK003 the job is pending, running, retrying or completed, or an unfinished job of its queue now holds its dedupe key; BK001 no such job; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.fail(1, 1, ''bad address'', p_retryable => false);
SELECT status, attempts, attempts - uncounted_attempts AS counted, jsonb_array_length(errors) AS history FROM backoff.replay(1);';

-- backoff.replay_dead_letters(queue, now): every dead-lettered job of a
-- queue back to pending, as backoff.replay does it, in one statement. What it
-- cannot replay it leaves dead-lettered and reports, one row per job with
-- the reason, instead of failing the whole batch: today that is a dedupe
-- key held by an unfinished job of the queue (or by an older dead letter
-- replayed in the same call). Like replay, it gives a fresh budget
-- (uncounted_attempts = attempts) and keeps the fencing token counting
-- (docs/adr/0020): a worker still running a dead letter's reaped attempt
-- cannot settle the replayed job's next claim. Admin only.
CREATE OR REPLACE FUNCTION backoff.replay_dead_letters(
    p_queue text,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (job_id bigint, replayed boolean, reason text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids      bigint[];
    v_reasons  text[];
    v_keys     bigint;
    v_keyed    bigint;
BEGIN
    -- The name rule of enqueue (backoff._check_name): a name no job can
    -- have is no queue to act on, and a paused lookalike must not be made.
    p_queue := backoff._check_name('queue', p_queue);
    p_now := backoff._now(p_now);
    -- A key whose job is no longer unfinished (an admin's direct write to
    -- backoff.jobs) holds nothing (backoff._take_dedupe_key).
    DELETE FROM backoff.dedupe_keys AS k
    WHERE k.queue = p_queue
      AND k.dedupe_key IN (SELECT j.dedupe_key FROM backoff.jobs AS j
                           WHERE j.queue = p_queue AND j.status = 'dead_lettered' AND j.dedupe_key IS NOT NULL)
      AND NOT EXISTS (SELECT FROM backoff.jobs AS u
                      WHERE u.id = k.job_id AND u.status IN ('pending', 'running', 'retrying', 'blocked'));
    WITH locked AS MATERIALIZED (
        SELECT j.id, j.dedupe_key
        FROM backoff.jobs AS j
        WHERE j.queue = p_queue AND j.status = 'dead_lettered'
        ORDER BY j.id
        FOR UPDATE
    ), dead AS MATERIALIZED (
        SELECT l.id, l.dedupe_key,
               pg_catalog.row_number() OVER (PARTITION BY l.dedupe_key ORDER BY l.id) AS nth
        FROM locked AS l
    ), verdict AS MATERIALIZED (
        SELECT d.id,
               CASE
                   WHEN d.dedupe_key IS NULL THEN NULL
                   WHEN h.id IS NOT NULL THEN
                       pg_catalog.format('dedupe key %s is held by unfinished job %s', pg_catalog.quote_literal(d.dedupe_key), h.id)
                   WHEN d.nth > 1 THEN
                       pg_catalog.format('dedupe key %s is held by job %s, replayed in this call', pg_catalog.quote_literal(d.dedupe_key),
                                         (SELECT f.id FROM dead AS f WHERE f.dedupe_key = d.dedupe_key AND f.nth = 1))
               END AS reason
        FROM dead AS d
        LEFT JOIN LATERAL (
            SELECT k.job_id AS id FROM backoff.dedupe_keys AS k
            WHERE d.dedupe_key IS NOT NULL AND k.queue = p_queue AND k.dedupe_key = d.dedupe_key) AS h ON true
    ), moved AS (
        -- Back to the current segment (docs/adr/0061): the finished rows
        -- deleted and the live ones inserted in one statement.
        DELETE FROM backoff.jobs AS j
        USING verdict AS v
        WHERE j.id = v.id AND v.reason IS NULL
        RETURNING j.*
    ), done AS (
        INSERT INTO backoff.jobs AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                       lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                       dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                       lease_expiries, schedule, schedule_slot, segment)
        OVERRIDING SYSTEM VALUE
        SELECT d.id, d.queue, d.payload, 'pending', d.priority, d.attempts, d.max_attempts, d.policy, p_now,
               NULL, NULL, d.last_attempted_at, d.last_failed_at, d.last_error,
               backoff._push_error(d.errors, d.attempts, 0, p_now, NULL, NULL, 'replayed', NULL, session_user::text),
               NULL, d.dedupe_key, d.created_at, NULL, d.attempts,
               0, d.schedule, d.schedule_slot, backoff._current_segment()
        FROM moved AS d
        RETURNING j.id, j.queue, j.dedupe_key
    ), keys AS (
        -- A key a concurrent enqueue took after the check is not taken
        -- here: the counts below differ and nothing is replayed.
        INSERT INTO backoff.dedupe_keys (queue, dedupe_key, job_id)
        SELECT d.queue, d.dedupe_key, d.id FROM done AS d WHERE d.dedupe_key IS NOT NULL
        ON CONFLICT (queue, dedupe_key) DO NOTHING
        RETURNING 1
    )
    SELECT pg_catalog.array_agg(v.id ORDER BY v.id), pg_catalog.array_agg(v.reason ORDER BY v.id),
           (SELECT count(*) FROM keys), (SELECT count(*) FROM done AS d WHERE d.dedupe_key IS NOT NULL)
    INTO v_ids, v_reasons, v_keys, v_keyed
    FROM verdict AS v;
    IF v_keys <> v_keyed THEN
        RAISE EXCEPTION 'cannot replay the dead letters of queue "%": a concurrent enqueue took a dedupe key; nothing was replayed, try again', p_queue
            USING ERRCODE = 'BK003';
    END IF;

    RETURN QUERY
    SELECT t.id, t.reason IS NULL, t.reason
    FROM unnest(v_ids, v_reasons) AS t(id, reason);

    IF FOUND THEN
        -- Children kept waiting for a replayed job wait for its new run
        -- (docs/adr/0087).
        IF EXISTS (SELECT FROM backoff.job_dependencies AS d
                   WHERE d.parent_id = ANY (v_ids) AND d.state = 'waiting') THEN
            PERFORM backoff._reopen_dependents(
                ARRAY(SELECT t.id FROM unnest(v_ids, v_reasons) AS t(id, reason) WHERE t.reason IS NULL));
        END IF;
        PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.replay_dead_letters(text, timestamptz) IS
'Replay every dead-lettered job of p_queue in one statement, as backoff.replay would each (status pending, run_at = p_now, a fresh budget: uncounted_attempts = attempts, so the counted attempt is 0, and lease_expiries = 0, while attempts, the fencing token, keeps counting; dead_letter_reason and completed_at cleared, history kept, with a replayed entry naming the login role as backoff.replay appends), and return one row per dead letter, in id order: job_id, replayed, and for a job it left dead-lettered the reason. A job is left when its dedupe key is held by an unfinished job of the queue, or by an older dead letter with the same key that this call replays. Notifies channel backoff_jobs when it replayed anything. Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, or a bad p_now (p_now NULL is the database clock); BK003 when a concurrent enqueue took a dedupe key between the check and the update (nothing is replayed; call again).
Example:
SELECT * FROM backoff.replay_dead_letters(''emails'');';

-- backoff.unblock(job id, now): an operator releases a blocked job from
-- the parents that failed under a 'wait' edge (docs/adr/0087): those edges
-- are 'released', and the job becomes pending when no parent is still
-- open, else it goes on waiting for those. The counter is locked first,
-- as a settling parent locks it. Admin only.
CREATE OR REPLACE FUNCTION backoff.unblock(
    p_job_id bigint,
    p_now    timestamptz DEFAULT now()
)
RETURNS backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job     backoff.jobs;
    v_left    integer;
    v_waiting integer;
BEGIN
    IF p_job_id IS NULL THEN
        RAISE EXCEPTION 'cannot unblock job "NULL": job id must not be null'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    SELECT b.remaining, b.waiting INTO v_left, v_waiting
    FROM backoff.job_blockers AS b
    WHERE b.job_id = p_job_id
    FOR UPDATE;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job "%" not found', p_job_id
            USING ERRCODE = 'BK001';
    END IF;
    IF v_job.status <> 'blocked' OR coalesce(v_waiting, 0) = 0 THEN
        RAISE EXCEPTION 'cannot unblock job "%": it is "%" and no failed parent keeps it waiting', p_job_id, v_job.status
            USING ERRCODE = 'BK003',
                  HINT = 'a job blocked by parents that have not finished waits for them; cancel it to give it up';
    END IF;
    UPDATE backoff.job_dependencies AS d SET state = 'released'
    WHERE d.child_id = p_job_id AND d.state = 'waiting';
    UPDATE backoff.job_blockers AS b SET waiting = 0 WHERE b.job_id = p_job_id;
    IF v_left = 0 THEN
        PERFORM backoff._release_blocked(ARRAY[p_job_id], p_now);
    END IF;
    SELECT * INTO v_job FROM backoff.jobs AS j WHERE j.id = p_job_id;
    RETURN v_job;
END
$$;

COMMENT ON FUNCTION backoff.unblock(bigint, timestamptz) IS
'Release blocked job p_job_id from the parents that failed (dead_lettered or cancelled) under an edge with on_failure ''wait'': those edges count as satisfied, and the job becomes pending if no other parent is still unfinished, else it waits for those. Returns the job. To run the failed parent again instead, replay it: the child then waits for its new run. Admin only.
Errors: BK001 no such job; BK003 it is not blocked, or no failed parent keeps it waiting; 22023 a NULL id, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT * FROM backoff.enqueue_graph(''[{"ref": "a", "queue": "etl"}, {"ref": "b", "queue": "etl", "depends_on": [{"ref": "a", "on_failure": "wait"}]}]'');
SELECT backoff.cancel(1, ''source gone'');
SELECT id, status FROM backoff.unblock(2);';

-- backoff.job_output(job id): the output a job's completion recorded
-- (backoff.job_outputs, docs/adr/0087), or NULL when it recorded none or
-- has not completed. Scoped as backoff.job: a job of a queue the caller may
-- not work on or produce into looks missing.
CREATE OR REPLACE FUNCTION backoff.job_output(p_job_id bigint)
RETURNS jsonb
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue  text;
    v_output jsonb;
BEGIN
    SELECT j.queue INTO v_queue FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND OR (backoff._scope_in_force()
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('work')), false)
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('produce')), false)) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    SELECT o.output INTO v_output FROM backoff.job_outputs AS o WHERE o.job_id = p_job_id;
    RETURN v_output;
END
$$;

COMMENT ON FUNCTION backoff.job_output(bigint) IS
'The output job p_job_id recorded when it completed (backoff.complete''s p_output, backoff.complete_many''s p_outputs), or NULL when it recorded none or has not completed. Kept until prune deletes the job. Workers, producers and admins.
Errors: BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may neither work on nor produce into.
Example:
SELECT backoff.enqueue(''thumbnails'');
SELECT id FROM backoff.claim(''thumbnails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1, p_output => ''{"url": "https://cdn.example.com/1.png"}'');
SELECT backoff.job_output(1);';

-- backoff.parent_outputs(job id): what a job's parents left it, in one
-- call: one row per job it depends on, with the parent's status and
-- output (docs/adr/0087). The child's queue is scoped as backoff.job; the
-- parents are read through their child, whatever their queues, as the
-- child's worker needs them. prune keeps a finished parent while its child
-- is unfinished.
CREATE OR REPLACE FUNCTION backoff.parent_outputs(p_job_id bigint)
RETURNS TABLE (parent_id bigint, queue text, status text, on_failure text, output jsonb)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue text;
    v_scope text[];
BEGIN
    SELECT j.queue INTO v_queue FROM backoff.jobs AS j WHERE j.id = p_job_id;
    v_scope := backoff._work_scope();
    IF NOT FOUND OR (v_scope IS NOT NULL AND NOT v_queue OPERATOR(pg_catalog.~~) ANY (v_scope)) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    RETURN QUERY
    SELECT d.parent_id, p.queue, p.status, d.on_failure, o.output
    FROM backoff.job_dependencies AS d
    LEFT JOIN backoff.jobs AS p ON p.id = d.parent_id
    LEFT JOIN backoff.job_outputs AS o ON o.job_id = d.parent_id
    WHERE d.child_id = p_job_id
    ORDER BY d.parent_id;
END
$$;

COMMENT ON FUNCTION backoff.parent_outputs(bigint) IS
'The jobs job p_job_id depends on, one row each in id order: parent_id, its queue and status (NULL when prune has deleted it), the edge''s on_failure, and the output it recorded when it completed (NULL if none). No row for a job without dependencies. Workers and admins.
Errors: BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may not work on.
Example:
SELECT * FROM backoff.enqueue_graph(''[{"ref": "a", "queue": "etl"}, {"ref": "b", "queue": "etl", "depends_on": ["a"]}]'');
SELECT id FROM backoff.claim(''etl'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1, p_output => ''{"rows": 42}'');
SELECT parent_id, status, output FROM backoff.parent_outputs(2);';

-- backoff._notify_awaiters(job ids): the jobs just finished (completed,
-- dead-lettered or cancelled) that someone awaits (backoff.await_job):
-- their registrations are deleted and channel backoff_finished is notified
-- with each one's id. The calls that finish a job run it only when a
-- probe of backoff.job_awaiters, empty unless the feature is used, finds
-- one of theirs: a NOTIFY serializes the commits of the transactions that
-- send one, so none is sent for a job nobody awaits.
CREATE OR REPLACE FUNCTION backoff._notify_awaiters(p_ids bigint[])
RETURNS void
LANGUAGE sql
VOLATILE
AS $$
    WITH d AS (
        DELETE FROM backoff.job_awaiters AS a
        WHERE a.job_id = ANY (p_ids)
        RETURNING a.job_id
    )
    SELECT pg_catalog.pg_notify('backoff_finished', d.job_id::text)
    FROM (SELECT DISTINCT d.job_id FROM d) AS d;
$$;

-- backoff.await_job(job id, awaiter, ttl): register that p_awaiter waits
-- for job p_job_id to finish, until now() + p_ttl, so that the call that
-- finishes it (complete, complete_many, fail, reap, cancel) notifies
-- channel backoff_finished with its id (backoff._notify_awaiters). The
-- registration follows the database's clock, not p_now: it is about a
-- live connection. Scoped as backoff.job_output: a job of a queue the
-- caller may neither work on nor produce into looks missing.
CREATE OR REPLACE FUNCTION backoff.await_job(
    p_job_id  bigint,
    p_awaiter text,
    p_ttl     interval DEFAULT interval '1 minute'
)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queue  text;
    v_status text;
BEGIN
    p_awaiter := backoff._check_name('awaiter', p_awaiter);
    IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
        RAISE EXCEPTION 'await job %: ttl must be positive and at most 1 day, got "%"', coalesce(p_job_id::text, 'NULL'), coalesce(p_ttl::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT j.queue, j.status INTO v_queue, v_status FROM backoff.jobs AS j WHERE j.id = p_job_id;
    IF NOT FOUND OR (backoff._scope_in_force()
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('work')), false)
                     AND NOT coalesce(v_queue OPERATOR(pg_catalog.~~) ANY (backoff._queue_scope('produce')), false)) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    IF v_status NOT IN ('completed', 'dead_lettered', 'cancelled') THEN
        INSERT INTO backoff.job_awaiters AS a (job_id, awaiter, expires_at)
        VALUES (p_job_id, p_awaiter, pg_catalog.now() + p_ttl)
        ON CONFLICT (job_id, awaiter) DO UPDATE SET expires_at = excluded.expires_at;
    END IF;
    -- Registrations of awaiters that went away, while we are here.
    DELETE FROM backoff.job_awaiters AS a WHERE a.expires_at < pg_catalog.now();
    RETURN v_status;
END
$$;

COMMENT ON FUNCTION backoff.await_job(bigint, text, interval) IS
'Register that p_awaiter waits for job p_job_id to finish, until now() + p_ttl (1 minute by default, at most 1 day): the call that completes, dead-letters or cancels it then notifies channel backoff_finished with the job''s id, and deletes the registration. Returns the job''s status now; a job already finished registers nothing. A client LISTENs first, then calls it, and reads the job again on a notification, on its own poll, or at its deadline; backoff.stop_awaiting ends a registration early. No notification is sent for a job nobody awaits. Through the PL/Proxy router a notification does not reach the client: it polls. Workers, producers and admins.
Errors: BK001 no such job, or for a caller scoped by backoff.grant_queue a job of a queue it may neither work on nor produce into; 22023 an awaiter that is not 1 to 128 bytes without control characters, a ttl that is NULL, not positive or over 1 day.
Example:
SELECT backoff.enqueue(''thumbnails'');
LISTEN backoff_finished;
SELECT backoff.await_job(1, ''web-1'', interval ''30 seconds'');';

-- backoff.stop_awaiting(job id, awaiter): end p_awaiter's registration
-- for job p_job_id (backoff.await_job), as an awaiter that gave up does.
CREATE OR REPLACE FUNCTION backoff.stop_awaiting(
    p_job_id  bigint,
    p_awaiter text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_awaiter := backoff._check_name('awaiter', p_awaiter);
    DELETE FROM backoff.job_awaiters AS a WHERE a.job_id = p_job_id AND a.awaiter = p_awaiter;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.stop_awaiting(bigint, text) IS
'End p_awaiter''s registration for job p_job_id (see backoff.await_job), as an awaiter whose deadline passed does. The finishing call deletes the registrations of the job it finishes, and await_job those expired. Returns whether a registration existed. Workers, producers and admins.
Errors: 22023 an awaiter that is not 1 to 128 bytes without control characters.
Example:
SELECT backoff.enqueue(''thumbnails'');
SELECT backoff.await_job(1, ''web-1'');
SELECT backoff.stop_awaiting(1, ''web-1'');  -- true';

-- backoff._error_signature(error): the rule behind backoff.error_signature
-- (the masks are documented there), for the functions that compute it per
-- row: dead_letter_sample, dead_letter_groups, count_jobs and bulk_jobs.
-- Neither SECURITY DEFINER nor SET, so that PostgreSQL inlines it into the
-- calling statement (it names only pg_catalog's functions, so no
-- search_path can change what it calls). The public function, which must
-- be SECURITY DEFINER with its search_path pinned, is planned and run as
-- a function at every call: 10,000 of them took most of the dead letters
-- page's time at a million jobs.
CREATE OR REPLACE FUNCTION backoff._error_signature(p_error text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT pg_catalog.regexp_replace(
             pg_catalog.regexp_replace(
               pg_catalog.regexp_replace(pg_catalog.left(coalesce(p_error, ''), 500),
                 '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
               '\m(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,}\M', '<hex>', 'g'),
             '[0-9]+', 'N', 'g')
$$;

-- backoff.error_signature(error): an error text with what varies between
-- occurrences of one failure masked, so that dead letters group by cause:
-- UUIDs become <id>, hexadecimal runs of 8 or more characters <hex>, and
-- every run of digits N. The web UI's dead-letter groups and
-- backoff.bulk_jobs' p_error_signature filter both use it.
CREATE OR REPLACE FUNCTION backoff.error_signature(p_error text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._error_signature(p_error)
$$;

COMMENT ON FUNCTION backoff.error_signature(text) IS
'The signature of an error text: its first 500 characters with UUIDs replaced by <id>, hexadecimal runs of 8 or more characters (with a digit) by <hex> and every run of digits by N, so that occurrences of one failure compare equal. NULL gives ''''. Immutable.
Example:
SELECT backoff.error_signature(''order 1234 failed: upstream 503''); -- order N failed: upstream N';

-- backoff.bulk_jobs(action, filter..., now): replay or cancel every job
-- that matches a filter, in one call, for operators acting on a whole
-- listing (the web UI's bulk actions). The filter is the one of the client's
-- List (queue, statuses, effective policy, dead-letter reason, text in the
-- last error, creation time range) plus an error signature
-- (backoff.error_signature). Each job goes through backoff.replay or
-- backoff.cancel in its own subtransaction: one row per matching job, in id
-- order, says whether it was done and if not why, so one job that cannot be
-- acted on does not undo the others. Admin only.
CREATE OR REPLACE FUNCTION backoff.bulk_jobs(
    p_action             text,
    p_queue              text DEFAULT NULL,
    p_statuses           text[] DEFAULT NULL,
    p_policy             text DEFAULT NULL,
    p_dead_letter_reason text DEFAULT NULL,
    p_error_contains     text DEFAULT NULL,
    p_error_signature    text DEFAULT NULL,
    p_created_from       timestamptz DEFAULT NULL,
    p_created_to         timestamptz DEFAULT NULL,
    p_limit              integer DEFAULT 10000,
    p_now                timestamptz DEFAULT now()
)
RETURNS TABLE (job_id bigint, done boolean, reason text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_action IS NULL OR p_action NOT IN ('replay', 'cancel') THEN
        RAISE EXCEPTION 'bulk action must be replay or cancel, got "%"', coalesce(p_action, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'bulk limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    FOR v_id IN
        SELECT j.id
        FROM backoff.jobs AS j
        WHERE (p_queue IS NULL OR j.queue = p_queue)
          AND (p_statuses IS NULL OR j.status = ANY (p_statuses))
          AND (p_policy IS NULL OR backoff.job_policy(j.policy, j.queue) = p_policy)
          AND (p_dead_letter_reason IS NULL OR j.dead_letter_reason = p_dead_letter_reason)
          AND (p_error_contains IS NULL OR pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower(p_error_contains)) > 0)
          AND (p_error_signature IS NULL OR backoff._error_signature(j.last_error) = p_error_signature)
          AND (p_created_from IS NULL OR j.created_at >= p_created_from)
          AND (p_created_to IS NULL OR j.created_at < p_created_to)
        ORDER BY j.id
        LIMIT p_limit
    LOOP
        job_id := v_id;
        BEGIN
            IF p_action = 'replay' THEN
                PERFORM backoff.replay(p_job_id => v_id, p_now => p_now);
            ELSE
                PERFORM backoff.cancel(p_job_id => v_id, p_reason => 'bulk cancel', p_now => p_now);
            END IF;
            done := true;
            reason := NULL;
        EXCEPTION WHEN OTHERS THEN
            done := false;
            reason := SQLERRM;
        END;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.bulk_jobs(text, text, text[], text, text, text, text, timestamptz, timestamptz, integer, timestamptz) IS
'Replay (p_action ''replay'') or cancel (''cancel'') every job matching the filter, at most p_limit (default 10000) in id order, in one call: each through backoff.replay or backoff.cancel in its own subtransaction. Returns one row per matching job: job_id, done, and for a job left alone the reason (the error the single call raised, e.g. a pending job cannot be replayed). NULL filter arguments do not filter; p_policy is the effective policy (backoff.job_policy); p_error_contains is case-insensitive text in last_error; p_error_signature compares backoff.error_signature(last_error); created_at in [p_created_from, p_created_to). Admin only.
Errors: 22023 for an action other than replay or cancel, a p_limit below 1 or a bad p_now.
Example:
SELECT * FROM backoff.bulk_jobs(''replay'', p_queue => ''emails'', p_statuses => ''{dead_lettered}'');';

-- backoff.prune(older than, limit, now): delete up to p_limit finished jobs
-- (completed, dead_lettered, cancelled) whose completed_at is older than
-- p_now - p_older_than. No index serves it, on purpose: an index on
-- completed_at would be paid by every settle, and prune runs rarely. The
-- scan stops as soon as it has p_limit rows, and old rows sit early in the
-- heap (docs/adr/0009-retention-and-prune.md).
-- It also removes the queue controls' runtime state that nothing reads any
-- more (docs/adr/0054), up to p_limit rows of each table per call: the
-- failure log, breaker row and token slots of a queue whose backoff.queues
-- row is gone or whose breaker / rate was removed, the slots a smaller
-- burst no longer uses, and log rows older than a configured breaker's
-- window (fail deletes only two per append, so a queue that stops failing
-- keeps its last window). While a breaker is open, the log rows from
-- half_open_at on are kept: the next half-open claim reopens from them.
-- The queue history (backoff.queue_events: pauses and resumes) goes with
-- the same retention as the finished jobs (docs/adr/0066).
-- These rows are not in the result (it counts jobs, so that "call it until
-- it returns less than p_limit" keeps its meaning); every delete skips
-- locked rows, so prune never waits for a claim or a fail.
CREATE OR REPLACE FUNCTION backoff.prune(
    p_older_than interval,
    p_limit      integer DEFAULT 10000,
    p_now        timestamptz DEFAULT now()
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_count integer;
    v_ids   bigint[];
BEGIN
    IF p_older_than IS NULL OR p_older_than < interval '0' OR NOT backoff._valid_span(p_older_than) THEN
        RAISE EXCEPTION 'prune: older_than must be between 0 and 876600 hours, got "%"', coalesce(p_older_than::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'prune: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- A finished job that an unfinished job depends on is kept, with its
    -- output: the dependent reads it (backoff.parent_outputs), and an
    -- operator may replay a failed parent that keeps a child waiting
    -- (docs/adr/0087).
    WITH d AS (
        DELETE FROM backoff.jobs AS j
        WHERE j.id = ANY (ARRAY(
            SELECT f.id
            FROM backoff.jobs AS f
            WHERE f.status IN ('completed', 'dead_lettered', 'cancelled')
              AND f.completed_at < p_now - p_older_than
              AND NOT EXISTS (SELECT FROM backoff.job_dependencies AS e
                              JOIN backoff.jobs AS c ON c.id = e.child_id
                              WHERE e.parent_id = f.id
                                AND c.status IN ('blocked', 'pending', 'running', 'retrying'))
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING j.id
    )
    SELECT array_agg(d.id) INTO v_ids FROM d;
    v_count := coalesce(cardinality(v_ids), 0);
    -- What the deleted jobs kept beside their rows: outputs, progress,
    -- their edges either way (a deleted parent's children are finished,
    -- or it would have been kept) and a stale counter.
    IF v_count > 0 THEN
        DELETE FROM backoff.job_outputs AS o WHERE o.job_id = ANY (v_ids);
        DELETE FROM backoff.job_progress AS g WHERE g.job_id = ANY (v_ids);
        DELETE FROM backoff.job_blockers AS b WHERE b.job_id = ANY (v_ids);
        DELETE FROM backoff.job_dependencies AS e WHERE e.child_id = ANY (v_ids);
        DELETE FROM backoff.job_dependencies AS e WHERE e.parent_id = ANY (v_ids);
    END IF;

    -- The failure log: a queue without a breaker (or without a row), and,
    -- with one, rows older than its window except those an open breaker's
    -- next half-open claim reopens from (failed_at >= half_open_at).
    DELETE FROM backoff.queue_failures AS f
    WHERE f.ctid = ANY (ARRAY(
        SELECT o.ctid
        FROM backoff.queue_failures AS o
        LEFT JOIN backoff.queues AS q ON q.name = o.queue
        LEFT JOIN backoff.queue_breakers AS b ON b.queue = o.queue
        WHERE q.breaker_failures IS NULL
           OR (o.failed_at <= p_now - q.breaker_window
               AND (b.opened_at IS NULL OR o.failed_at < b.half_open_at))
        LIMIT p_limit
        FOR UPDATE OF o SKIP LOCKED));
    -- The breaker row of a queue without a breaker (no row = closed).
    DELETE FROM backoff.queue_breakers AS b
    WHERE b.queue = ANY (ARRAY(
        SELECT s.queue
        FROM backoff.queue_breakers AS s
        WHERE NOT EXISTS (SELECT FROM backoff.queues AS q
                          WHERE q.name = s.queue AND q.breaker_failures IS NOT NULL)
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED));
    -- Token slots of a queue without a rate, and the slots numbered
    -- least(16, burst) or more, which claim ignores (docs/adr/0045).
    DELETE FROM backoff.queue_tokens AS t
    WHERE (t.queue, t.slot) IN (
        SELECT s.queue, s.slot
        FROM backoff.queue_tokens AS s
        LEFT JOIN backoff.queues AS q ON q.name = s.queue
        WHERE q.rate IS NULL
           OR s.slot >= least(16, backoff._queue_burst(q.rate, q.burst))
        LIMIT p_limit
        FOR UPDATE OF s SKIP LOCKED);
    -- The queue history, with the finished jobs' retention.
    DELETE FROM backoff.queue_events AS e
    WHERE e.id = ANY (ARRAY(
        SELECT o.id
        FROM backoff.queue_events AS o
        WHERE o.at < p_now - p_older_than
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED));
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.prune(interval, integer, timestamptz) IS
'Delete up to p_limit finished jobs (completed, dead_lettered, cancelled) whose completed_at is before p_now - p_older_than; returns how many. Dead letters are evidence: choose p_older_than long enough to read them. A finished job that a blocked, pending, running or retrying job depends on is kept until that job finishes; a deleted job''s output, progress and dependency edges go with it. Call it repeatedly until it returns less than p_limit. Safe to run concurrently (FOR UPDATE SKIP LOCKED).
It also deletes, up to p_limit rows of each table per call and not counted in the result, the queue controls'' state that nothing reads any more: rows of backoff.queue_failures, backoff.queue_breakers and backoff.queue_tokens of a queue that has no backoff.queues row or no breaker (failures, breakers) or no rate (tokens); token slots numbered least(16, burst) or more; failure-log rows at or before p_now - breaker_window of a queue with a breaker, except, while its breaker is open, those at or after half_open_at; and the queue history (backoff.queue_events) from before p_now - p_older_than.
Errors: 22023 for a NULL or negative p_older_than, a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1);
SELECT backoff.prune(''7 days'', p_now => now() + interval ''8 days'') AS deleted;';

-- backoff.stats(window, now): one row per queue for the CLI and dashboards:
-- jobs per status, how many are due and how long the oldest due job has
-- waited, and what happened in the window (p_now - p_window, p_now]:
-- retries scheduled and jobs dead-lettered. A failure is read from the error
-- history, so only the 20 most recent per job count; an operator's entries
-- there (replayed, cancelled) are no failures, and a failure that
-- dead-lettered its job stays no retry when the job is replayed
-- (docs/adr/0066). expired counts the running jobs whose lease ended before
-- p_now: work a dead worker stranded, until reap settles it. One scan of
-- the table: fine for an operator's command, not for a tight loop.
CREATE OR REPLACE FUNCTION backoff.stats(
    p_window interval DEFAULT '1 hour',
    p_now    timestamptz DEFAULT now()
)
RETURNS TABLE (
    queue          text,
    pending        bigint,
    running        bigint,
    expired        bigint,
    retrying       bigint,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    due            bigint,
    oldest_due_age interval,
    retries        bigint,
    dead_letters   bigint,
    paused         boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_window IS NULL OR p_window < interval '0' OR NOT backoff._valid_span(p_window) THEN
        RAISE EXCEPTION 'stats: window must be between 0 and 876600 hours, got "%"', coalesce(p_window::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    RETURN QUERY
    WITH counts AS (
        SELECT j.queue,
               count(*) FILTER (WHERE j.status = 'pending') AS pending,
               count(*) FILTER (WHERE j.status = 'running') AS running,
               count(*) FILTER (WHERE j.lease_until < p_now) AS expired,
               count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
               count(*) FILTER (WHERE j.status = 'completed') AS completed,
               count(*) FILTER (WHERE j.status = 'dead_lettered') AS dead_lettered,
               count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now) AS due,
               p_now - min(j.run_at) FILTER (WHERE j.status IN ('pending', 'retrying') AND j.run_at <= p_now)
                   AS oldest_due_age,
               count(*) FILTER (WHERE j.status = 'dead_lettered'
                                  AND j.completed_at > p_now - p_window AND j.completed_at <= p_now)
                   AS dead_letters
        FROM backoff.jobs AS j
        GROUP BY j.queue
    ),
    failures AS (
        -- Failures in the window that were followed by a retry: every
        -- failed attempt (kind error or lease_expired) in the window but the
        -- one that dead-lettered its job: the last entry of a dead letter,
        -- or an entry an operator's replay follows.
        SELECT j.queue, count(*) AS retries
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL jsonb_array_elements(j.errors) WITH ORDINALITY AS e(entry, n)
        WHERE j.last_failed_at > p_now - p_window
          AND coalesce(e.entry ->> 'kind', 'error') IN ('error', 'lease_expired')
          AND (e.entry ->> 'at')::timestamptz > p_now - p_window
          AND (e.entry ->> 'at')::timestamptz <= p_now
          AND NOT (j.status = 'dead_lettered' AND e.n = jsonb_array_length(j.errors))
          AND coalesce(j.errors -> e.n::integer ->> 'kind', '') <> 'replayed'
        GROUP BY j.queue
    )
    SELECT c.queue, c.pending, c.running, c.expired, c.retrying, c.completed, c.dead_lettered, c.cancelled,
           c.due, c.oldest_due_age, coalesce(f.retries, 0), c.dead_letters, coalesce(q.paused, false)
    FROM counts AS c
    LEFT JOIN failures AS f ON f.queue = c.queue
    LEFT JOIN backoff.queues AS q ON q.name = c.queue
    ORDER BY c.queue;
END
$$;

COMMENT ON FUNCTION backoff.stats(interval, timestamptz) IS
'One row per queue that has jobs: counts per status (pending, running, retrying, completed, dead_lettered, cancelled); expired = running jobs whose lease ended before p_now (stranded by a worker that stopped; backoff.reap settles them); paused = the queue is paused (backoff.pause_queue); due = pending or retrying with run_at <= p_now; oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and for the window (p_now - p_window, p_now]: retries = failed attempts (handler errors and expired leases) followed by a retry, read from the error history (an operator''s replay is no retry: the failure that dead-lettered a replayed job is not counted, nor are the history''s replayed and cancelled entries); dead_letters = jobs dead-lettered. Scans the whole table: for operators and dashboards, not for tight loops.
Errors: 22023 for a NULL or negative window, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'') FROM generate_series(1, 3);
SELECT id FROM backoff.claim(''emails'', ''worker-1'');
SELECT queue, pending, running, expired, due, retries, dead_letters, paused FROM backoff.stats(''15 minutes'');';

-- backoff.queue_state(queue, now): where a queue's controls stand at p_now
-- (docs/adr/0045): the circuit breaker's state, when it opened, the
-- failures counted in its window, the probes a half-open breaker still
-- hands out, the rate limit and the tokens in its bucket, and when a claim
-- can return jobs again. A pure read: an open breaker past its cooldown
-- reads as half_open, and the bucket's lazy refill is computed, not
-- written. One row, also for a queue without a backoff.queues row.
CREATE OR REPLACE FUNCTION backoff.queue_state(
    p_queue text,
    p_now   timestamptz DEFAULT NULL
)
RETURNS TABLE (
    queue         text,
    state         text,
    opened_at     timestamptz,
    failures      bigint,
    probes_left   integer,
    rate          double precision,
    burst         integer,
    tokens        double precision,
    next_claim_at timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_q        backoff.queues;
    v_state    backoff.queue_breakers;
    v_tokens   double precision;
    v_caps     double precision;
    v_nslots   integer;
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_now := backoff._now(p_now);
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;

    SELECT * INTO v_q FROM backoff.queues AS q WHERE q.name = p_queue;
    queue := p_queue;
    state := 'closed';
    failures := 0;

    IF v_q.breaker_failures IS NOT NULL THEN
        SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        IF v_state.opened_at IS NOT NULL THEN
            opened_at := v_state.opened_at;
            IF p_now < v_state.half_open_at THEN
                state := 'open';
                next_claim_at := v_state.half_open_at;
            ELSE
                state := 'half_open';
                probes_left := coalesce(v_state.probes_left, v_q.breaker_probes);
            END IF;
        END IF;
        -- What fail counts toward the threshold: the window, since the
        -- breaker last changed state.
        SELECT count(*) INTO failures
        FROM backoff.queue_failures AS f
        WHERE f.queue = p_queue
          AND f.failed_at > greatest(p_now - v_q.breaker_window, v_state.counted_from)
          AND f.failed_at <= p_now;
    END IF;

    IF v_q.rate IS NOT NULL THEN
        rate := v_q.rate;
        burst := backoff._queue_burst(v_q.rate, v_q.burst);
        v_nslots := least(16, burst);
        -- The bucket's slots (backoff._claim_controlled), each refilled at
        -- its share of the rate up to its share of the burst; a slot not
        -- created yet is full.
        SELECT pg_catalog.sum(s.cap),
               pg_catalog.sum(least(s.cap, t.tokens + v_q.rate * s.cap / burst
                   * greatest(0, extract(epoch FROM p_now - t.refilled_at)::double precision)))
        INTO v_caps, v_tokens
        FROM backoff.queue_tokens AS t
        CROSS JOIN LATERAL (SELECT (burst / v_nslots + (t.slot < burst % v_nslots)::integer)::double precision AS cap) AS s
        WHERE t.queue = p_queue AND t.slot < v_nslots;
        tokens := coalesce(v_tokens, 0) + (burst - coalesce(v_caps, 0));
        -- (1e-9: as claim, which takes the tokens of all the free slots
        -- it needs, counts a whole token.)
        IF tokens + 1e-9 < 1 AND state <> 'half_open' THEN
            -- The next whole token: until then no slot is full (each holds
            -- at least one), so the slots together refill at rate. The wait
            -- is bounded so that the sum stays a time.
            next_claim_at := greatest(next_claim_at, backoff._clamp_time(p_now
                + least((1 - tokens) / v_q.rate, 3155760000::double precision) * interval '1 second'));
        END IF;
    END IF;

    IF v_q.paused THEN
        next_claim_at := NULL;  -- a pause has no end time
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.queue_state(text, timestamptz) IS
'The controls of p_queue at p_now (backoff.queues: rate, burst, breaker_failures, breaker_window, breaker_cooldown, breaker_probes), one row, also for a queue without a row (all off): queue; state closed, open or half_open (closed without a breaker; an open breaker past its cooldown reads half_open, nothing is written); opened_at (NULL when closed); failures, the fails counted toward breaker_failures in (p_now - breaker_window, p_now] since the breaker last changed state (0 without a breaker); probes_left (half open: jobs claim still hands out before a result closes or reopens the breaker; else NULL); rate; burst (the bucket size: burst, else greatest(1, ceil(rate)), at most 2147483647); tokens available at p_now (NULL without a rate); next_claim_at: NULL when controls let a claim return jobs now, else when the cooldown ends or the next whole token arrives, whichever is later; NULL too for a paused queue (no end time) and for a half-open breaker whose probes are all out (it waits for a result). Only retryable fails count as failures: not a fail with p_retryable false (bad input), not a lease expiry.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on p_queue.
Example:
UPDATE backoff.queues SET rate = 5, breaker_failures = 3, breaker_window = ''30 seconds'', breaker_cooldown = ''1 minute'' WHERE name = ''emails'';
SELECT state, failures, tokens, next_claim_at FROM backoff.queue_state(''emails'');';

-- backoff.next_work(queues, worker, ttl, now): one look for an idle Worker
-- (docs/adr/0083). Instead of an empty claim and a queue_state per queue
-- every poll interval, and fire_schedules, reap and rotate on their own
-- tickers, a Worker with nothing to do asks once per poll interval when
-- each of these next has work, and calls only what has:
--   * kind 'queue', one row per p_queues element: the earliest run_at of
--     its pending and retrying jobs in the current live segment (the only
--     one claim takes from), pushed back to when its controls let a claim
--     return jobs (queue_state's next_claim_at); NULL when it has none or
--     the queue is paused (a pause has no end time: resume notifies
--     nothing, so the next look after it sees the jobs);
--   * kind 'schedules': the earliest next_fire_at of the schedules not
--     paused that the caller may fire (fire_schedules' own scope);
--   * kind 'reap': the earliest lease_until of the running jobs the caller
--     may reap: reap has work once it has passed;
--   * kind 'rotate': p_now when a live segment other than the current one
--     holds rows (a switch left rows that rotate has not moved yet: claims
--     cannot see them until it does), else NULL.
-- The caller's wake-up registrations (backoff.wait_for_jobs) of p_queues
-- are renewed only when missing or expiring within a third of p_ttl, so
-- most looks write nothing and take no transaction id: a look every
-- second must not leave a dead row per second under a held snapshot
-- (docs/adr/0079). Reads at the caller's isolation level; the answer is a
-- hint (the Worker claims to find out), never a promise.
CREATE OR REPLACE FUNCTION backoff.next_work(
    p_queues text[],
    p_worker text DEFAULT NULL,
    p_ttl    interval DEFAULT interval '30 seconds',
    p_now    timestamptz DEFAULT now()
)
RETURNS TABLE (kind text, queue text, at timestamptz)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_q       text;
    v_ctl     backoff.queues;
    v_at      timestamptz;
    v_next    timestamptz;
    v_scope   text[] := backoff._queue_scope('work');
    v_fire    text[];
    v_renew   text[];
BEGIN
    IF p_queues IS NULL OR cardinality(p_queues) > 1000 THEN
        RAISE EXCEPTION 'next work: queues must be an array of at most 1000 names, got %',
            coalesce(cardinality(p_queues)::text || ' names', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_queues := ARRAY(SELECT DISTINCT backoff._check_name('queue', u.q) FROM unnest(p_queues) AS u(q));
    IF p_worker IS NOT NULL THEN
        p_worker := backoff._check_name('worker', p_worker);
        IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
            RAISE EXCEPTION 'next work: ttl must be positive and at most 1 day, got "%"', coalesce(p_ttl::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    p_now := backoff._now(p_now);
    IF cardinality(p_queues) > 0 AND backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(p_queues, 'work');
    END IF;

    kind := 'queue';
    FOREACH v_q IN ARRAY p_queues LOOP
        queue := v_q;
        SELECT min(c.run_at) INTO v_at
        FROM backoff.jobs AS c
        WHERE c.segment = backoff._current_segment()
          AND c.queue = v_q
          AND c.status IN ('pending', 'retrying');
        SELECT * INTO v_ctl FROM backoff.queues AS q WHERE q.name = v_q;
        IF v_ctl.paused THEN
            v_at := NULL;
        ELSIF v_at IS NOT NULL AND (v_ctl.rate IS NOT NULL OR v_ctl.breaker_failures IS NOT NULL) THEN
            SELECT s.next_claim_at INTO v_next FROM backoff.queue_state(v_q, p_now) AS s;
            v_at := greatest(v_at, v_next);
        END IF;
        at := v_at;
        RETURN NEXT;
    END LOOP;

    queue := NULL;
    kind := 'schedules';
    v_fire := backoff._queue_scope('work') || backoff._queue_scope('produce');
    at := (SELECT min(s.next_fire_at) FROM backoff.schedules AS s
           WHERE NOT s.paused
             AND (v_fire IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_fire)));
    RETURN NEXT;

    kind := 'reap';
    at := (SELECT min(r.lease_until) FROM backoff.jobs AS r
           WHERE r.lease_until IS NOT NULL
             AND (v_scope IS NULL OR r.queue OPERATOR(pg_catalog.~~) ANY (v_scope)));
    RETURN NEXT;

    kind := 'rotate';
    at := CASE WHEN EXISTS (SELECT FROM backoff.jobs AS j
                            WHERE j.segment > 0 AND j.segment <> backoff._current_segment())
               THEN p_now END;
    RETURN NEXT;

    -- Renew only what would otherwise expire before a third of p_ttl: the
    -- registrations follow the database's clock, as wait_for_jobs.
    IF p_worker IS NOT NULL AND cardinality(p_queues) > 0 THEN
        v_renew := ARRAY(
            SELECT u.q FROM unnest(p_queues) AS u(q)
            WHERE NOT EXISTS (SELECT FROM backoff.waiting_workers AS w
                              WHERE w.queue = u.q AND w.worker = p_worker
                                AND w.expires_at > pg_catalog.now() + p_ttl / 3));
        IF cardinality(v_renew) > 0 THEN
            INSERT INTO backoff.waiting_workers AS w (queue, worker, expires_at)
            SELECT u.q, p_worker, pg_catalog.now() + p_ttl FROM unnest(v_renew) AS u(q)
            ON CONFLICT (queue, worker) DO UPDATE SET expires_at = excluded.expires_at;
            DELETE FROM backoff.waiting_workers AS w
            WHERE w.queue = ANY (v_renew) AND w.expires_at < pg_catalog.now();
        END IF;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.next_work(text[], text, interval, timestamptz) IS
'One look for an idle worker (docs/adr/0083): when each kind of work next comes due at p_now, so that a worker with nothing to do sends this once per poll interval instead of an empty claim and a queue_state per queue, fire_schedules, reap and rotate. Rows: kind queue, one per distinct element of p_queues: the earliest run_at of its pending and retrying jobs that claim can see, no earlier than when its controls let a claim return jobs (queue_state''s next_claim_at), NULL when it has none or is paused; kind schedules (queue NULL): the earliest next_fire_at of the schedules not paused that the caller may fire, NULL when none; kind reap: the earliest lease_until of the running jobs (reap has work once it has passed), NULL when none; kind rotate: p_now when a live segment other than the current one holds rows that rotate has yet to move, else NULL. A time at or before p_now means that call has work now. With p_worker, the worker''s wake-up registrations (backoff.wait_for_jobs) of p_queues are written when missing or expiring within p_ttl / 3, for p_ttl from now() (the database clock); otherwise nothing is written, so most looks take no transaction id. A hint read at the caller''s isolation level: the claim decides.
Errors: 22023 for p_queues NULL or over 1000 names, a queue or worker that is not 1 to 128 bytes without control or format characters, with p_worker a ttl that is NULL, not positive or over 1 day, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on one of p_queues.
Example:
SELECT backoff.enqueue(''emails'', ''{}'', p_run_at => now() + interval ''1 minute'');
SELECT kind, queue, at <= now() AS due FROM backoff.next_work(ARRAY[''emails'', ''reports''], ''worker-1'');';

-- backoff.overview(now, exact_limit): one row per queue for the web UI's
-- overview, which refreshes every few seconds, without a scan of the
-- finished rows (docs/adr/0048-overview-without-full-scans.md):
-- * pending, retrying, due and the oldest due from an index-only scan of
--   jobs_claimable_idx (its live rows only; status is INCLUDEd);
-- * running from jobs_lease_idx (lease_until is set exactly while running),
--   and expired: those whose lease ended before p_now, stranded by a worker
--   that stopped until reap settles them (docs/adr/0066);
-- * completed, dead_lettered and cancelled from jobs_finished_idx, counted
--   exactly while a queue has at most p_exact_limit finished rows; above,
--   the planner's estimate for (queue, status) (statistics
--   jobs_queue_status, as of the last ANALYZE), and finished_exact is false;
-- * the queue list: backoff.queues, and the queues of live, running and
--   finished rows (a loose index scan over jobs_finished_idx);
-- * the controls of a queue that has a rate or a breaker: backoff.queue_state.
-- VOLATILE only because it runs EXPLAIN for the estimates; it writes
-- nothing and takes no lock beyond a plain read. No parallel workers: a
-- refresh uses one core, whatever the workers need. Admin only.
CREATE OR REPLACE FUNCTION backoff.overview(
    p_now         timestamptz DEFAULT NULL,
    p_exact_limit integer DEFAULT 10000
)
RETURNS TABLE (
    queue          text,
    policy         text,
    paused         boolean,
    configured     boolean,
    pending        bigint,
    running        bigint,
    expired        bigint,
    retrying       bigint,
    due            bigint,
    oldest_due_age interval,
    completed      bigint,
    dead_lettered  bigint,
    cancelled      bigint,
    finished_exact boolean,
    breaker        text,
    rate           double precision,
    tokens         double precision,
    next_claim_at  timestamptz
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $$
DECLARE
    v_row   record;
    v_total bigint;
    v_plan  json;
    v_state text;
BEGIN
    IF p_exact_limit IS NULL OR p_exact_limit < 0 THEN
        RAISE EXCEPTION 'overview: exact limit must be 0 or more, got "%"', coalesce(p_exact_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    FOR v_row IN
        WITH RECURSIVE finished_queues (name) AS (
            (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
            UNION ALL
            SELECT (SELECT j.queue FROM backoff.jobs AS j
                    WHERE j.completed_at IS NOT NULL AND j.queue > f.name ORDER BY j.queue LIMIT 1)
            FROM finished_queues AS f
            WHERE f.name IS NOT NULL
        ),
        waiting AS (
            SELECT j.queue AS name,
                   count(*) FILTER (WHERE j.status = 'pending') AS pending,
                   count(*) FILTER (WHERE j.status = 'retrying') AS retrying,
                   count(*) FILTER (WHERE j.run_at <= p_now) AS due,
                   min(j.run_at) AS first_run_at
            FROM backoff.jobs AS j
            WHERE j.status IN ('pending', 'retrying')
            GROUP BY j.queue
        ),
        leased AS (
            SELECT j.queue AS name, count(*) AS running, count(*) FILTER (WHERE j.lease_until < p_now) AS expired
            FROM backoff.jobs AS j
            WHERE j.lease_until IS NOT NULL
            GROUP BY j.queue
        ),
        names AS (
            SELECT q.name FROM backoff.queues AS q
            UNION SELECT w.name FROM waiting AS w
            UNION SELECT l.name FROM leased AS l
            UNION SELECT f.name FROM finished_queues AS f WHERE f.name IS NOT NULL
        )
        SELECT n.name,
               coalesce(q.policy, backoff.job_policy(NULL, n.name)) AS policy,
               coalesce(q.paused, false) AS paused,
               (q.rate IS NOT NULL OR q.breaker_failures IS NOT NULL) AS controlled,
               q.name IS NOT NULL AS configured,
               coalesce(w.pending, 0) AS pending,
               coalesce(l.running, 0) AS running,
               coalesce(l.expired, 0) AS expired,
               coalesce(w.retrying, 0) AS retrying,
               coalesce(w.due, 0) AS due,
               CASE WHEN w.first_run_at <= p_now THEN p_now - w.first_run_at END AS oldest_due_age
        FROM names AS n
        LEFT JOIN backoff.queues AS q ON q.name = n.name
        LEFT JOIN waiting AS w ON w.name = n.name
        LEFT JOIN leased AS l ON l.name = n.name
        ORDER BY n.name
    LOOP
        queue := v_row.name;
        policy := v_row.policy;
        paused := v_row.paused;
        configured := v_row.configured;
        pending := v_row.pending;
        running := v_row.running;
        expired := v_row.expired;
        retrying := v_row.retrying;
        due := v_row.due;
        oldest_due_age := v_row.oldest_due_age;
        -- At most p_exact_limit + 1 entries of the queue's finished rows.
        SELECT count(*) FILTER (WHERE f.status = 'completed'),
               count(*) FILTER (WHERE f.status = 'dead_lettered'),
               count(*) FILTER (WHERE f.status = 'cancelled'),
               count(*)
        INTO completed, dead_lettered, cancelled, v_total
        FROM (SELECT j.status FROM backoff.jobs AS j
              WHERE j.queue = v_row.name AND j.completed_at IS NOT NULL
              LIMIT p_exact_limit + 1) AS f;
        finished_exact := v_total <= p_exact_limit;
        -- The queue's controls, for a queue that has any.
        breaker := 'closed';
        rate := NULL;
        tokens := NULL;
        next_claim_at := NULL;
        IF v_row.controlled THEN
            SELECT s.state, s.rate, s.tokens, s.next_claim_at
            INTO breaker, rate, tokens, next_claim_at
            FROM backoff.queue_state(v_row.name, p_now) AS s;
        END IF;
        IF NOT finished_exact THEN
            -- The planner's row estimate: most common (queue, status) pairs
            -- from statistics jobs_finished_queue_status, else per-column
            -- statistics, of the finished partition, where finished jobs
            -- live (docs/adr/0061; the live segments would each add the
            -- planner's least estimate, a row).
            FOREACH v_state IN ARRAY ARRAY['completed', 'dead_lettered', 'cancelled'] LOOP
                EXECUTE pg_catalog.format(
                    'EXPLAIN (FORMAT JSON) SELECT 1 FROM backoff.jobs_finished WHERE queue = %L AND status = %L',
                    v_row.name, v_state) INTO v_plan;
                CASE v_state
                    WHEN 'completed' THEN completed := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                    WHEN 'dead_lettered' THEN dead_lettered := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                    ELSE cancelled := ((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::float8)::bigint;
                END CASE;
            END LOOP;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.overview(timestamptz, integer) IS
'One row per queue (configured in backoff.queues, or holding jobs), by name, for a display that refreshes often (the web UI''s overview): policy (backoff.job_policy), paused, configured; exact counts of the live statuses pending, running and retrying; expired = running jobs whose lease ended before p_now (stranded by a worker that stopped, until backoff.reap settles them); due = pending or retrying with run_at <= p_now and oldest_due_age = p_now - the earliest run_at among them (NULL when none is due); and completed, dead_lettered, cancelled: exact when the queue has at most p_exact_limit (default 10000) finished jobs (finished_exact true), else the planner''s estimate from the table statistics as of the last ANALYZE (finished_exact false; show them as approximate); for a queue with a rate or a circuit breaker, breaker, rate, tokens and next_claim_at as backoff.queue_state reads them (else breaker ''closed'' and NULLs). Reads indexes, not the whole table: its cost grows with the live jobs and the number of queues, not with the finished ones. backoff.stats keeps its exact whole-table counts for the CLI. Admin only.
Errors: 22023 for a NULL or negative p_exact_limit or a bad p_now.
Example:
SELECT queue, pending, running, expired, retrying, due, completed, finished_exact FROM backoff.overview();';

-- backoff.workers(now): the workers the database knows about, from the
-- jobs they hold (locked_by of the running jobs, read through
-- jobs_lease_idx): no worker writes anything for it, so a claim, a
-- heartbeat and a settle cost what they did (docs/adr/0066). A worker
-- that holds no job is not known here. The newest lease end stands for
-- the latest sign of life: a heartbeat or a claim moves it forward, so a
-- worker whose newest lease has expired has stopped renewing every lease
-- it holds. Admin only.
CREATE OR REPLACE FUNCTION backoff.workers(p_now timestamptz DEFAULT now())
RETURNS TABLE (
    worker           text,
    queues           text[],
    jobs             bigint,
    expired          bigint,
    oldest_started   timestamptz,
    oldest_lease     timestamptz,
    latest_lease     timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_now := backoff._now(p_now);
    RETURN QUERY
    SELECT coalesce(j.locked_by, ''), pg_catalog.array_agg(DISTINCT j.queue ORDER BY j.queue),
           count(*), count(*) FILTER (WHERE j.lease_until < p_now),
           min(j.last_attempted_at), min(j.lease_until), max(j.lease_until)
    FROM backoff.jobs AS j
    WHERE j.lease_until IS NOT NULL
    GROUP BY 1
    ORDER BY 1;
END
$$;

COMMENT ON FUNCTION backoff.workers(timestamptz) IS
'One row per worker that holds running jobs (locked_by; '''' for jobs claimed without a worker name), by name: queues it holds jobs of, jobs = how many it holds, expired = how many of them have a lease that ended before p_now (stranded: backoff.reap settles them), oldest_started = the earliest start (last_attempted_at) of its attempts, oldest_lease and latest_lease = the earliest and the latest lease end (a heartbeat or a claim moves the latest forward; when it is before p_now the worker renews nothing any more). Computed from the running jobs (jobs_lease_idx): workers write nothing for it, and a worker that holds no job is not listed. Admin only.
Errors: 22023 for a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT worker, queues, jobs, expired, latest_lease - now() AS lease_left FROM backoff.workers(now() + interval ''1 minute'');';

-- backoff.activity(since, bucket, now): what happened per queue and per
-- bucket of time in [p_since, p_now]: jobs completed, dead-lettered and
-- cancelled (by completed_at, read from jobs_finished_idx one queue at a
-- time) and failed attempts (the error history of the jobs whose
-- last_failed_at is in the range, found by jobs_failed_idx). Buckets are
-- aligned to multiples of p_bucket since 2000-01-01 00:00 UTC, not to
-- p_now, so a bucket that has ended reads the same on every call: a display
-- that refreshes (the web UI's chart) keeps the ended ones and asks only
-- for the rest (docs/adr/0048-overview-without-full-scans.md). Its cost
-- grows with the events in the range, not with the table. Admin only.
CREATE OR REPLACE FUNCTION backoff.activity(
    p_since  timestamptz,
    p_bucket interval DEFAULT '1 minute',
    p_now    timestamptz DEFAULT NULL
)
RETURNS TABLE (
    queue         text,
    bucket        timestamptz,
    completed     bigint,
    failed        bigint,
    dead_lettered bigint,
    cancelled     bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET max_parallel_workers_per_gather = 0
SET jit = off
AS $$
BEGIN
    IF p_bucket IS NULL OR p_bucket < interval '1 second' OR NOT backoff._valid_span(p_bucket) THEN
        RAISE EXCEPTION 'activity: bucket must be between 1 second and 876600 hours, got "%"', coalesce(p_bucket::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    IF p_since IS NULL OR NOT pg_catalog.isfinite(p_since) THEN
        RAISE EXCEPTION 'activity: since must be a finite time, got "%"', coalesce(p_since::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_since > p_now THEN
        RETURN;
    END IF;
    IF extract(epoch FROM p_now - p_since) / extract(epoch FROM p_bucket) > 100000 THEN
        RAISE EXCEPTION 'activity: at most 100000 buckets, got % buckets of "%" since "%"',
            pg_catalog.ceil(extract(epoch FROM p_now - p_since) / extract(epoch FROM p_bucket)), p_bucket, p_since
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH RECURSIVE finished_queues (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j
                WHERE j.completed_at IS NOT NULL AND j.queue > f.name ORDER BY j.queue LIMIT 1)
        FROM finished_queues AS f
        WHERE f.name IS NOT NULL
    ),
    finished AS (
        SELECT f.name,
               pg_catalog.date_bin(p_bucket, e.completed_at, '2000-01-01 00:00:00+00'::timestamptz) AS b,
               count(*) FILTER (WHERE e.status = 'completed') AS c,
               count(*) FILTER (WHERE e.status = 'dead_lettered') AS d,
               count(*) FILTER (WHERE e.status = 'cancelled') AS x
        FROM finished_queues AS f
        CROSS JOIN LATERAL (
            SELECT j.completed_at, j.status FROM backoff.jobs AS j
            WHERE j.queue = f.name AND j.completed_at >= p_since AND j.completed_at <= p_now
            OFFSET 0 -- one index-only range per queue, never a join over the whole table
        ) AS e
        WHERE f.name IS NOT NULL
        GROUP BY 1, 2
    ),
    failures AS (
        SELECT j.queue AS name,
               pg_catalog.date_bin(p_bucket, (h.entry ->> 'at')::timestamptz, '2000-01-01 00:00:00+00'::timestamptz) AS b,
               count(*) AS n
        FROM backoff.jobs AS j
        CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(j.errors) AS h(entry)
        WHERE j.last_failed_at >= p_since
          -- Failed attempts only: not an operator's replay or cancel.
          AND coalesce(h.entry ->> 'kind', 'error') IN ('error', 'lease_expired')
          AND (h.entry ->> 'at')::timestamptz >= p_since
          AND (h.entry ->> 'at')::timestamptz <= p_now
        GROUP BY 1, 2
    )
    SELECT coalesce(fi.name, fa.name), coalesce(fi.b, fa.b), coalesce(fi.c, 0), coalesce(fa.n, 0),
           coalesce(fi.d, 0), coalesce(fi.x, 0)
    FROM finished AS fi
    FULL JOIN failures AS fa ON fa.name = fi.name AND fa.b = fi.b
    ORDER BY 1, 2;
END
$$;

COMMENT ON FUNCTION backoff.activity(timestamptz, interval, timestamptz) IS
'Per queue and per bucket of p_bucket (default 1 minute) in [p_since, p_now] (both included): completed, dead_lettered and cancelled = jobs that reached that status then (completed_at), failed = failed attempts then (handler errors and expired leases, from the error history, which keeps the 20 most recent per job; its replayed and cancelled entries are no failures). Buckets are aligned to multiples of p_bucket since 2000-01-01 00:00 UTC (bucket is the start), so an ended bucket reads the same on later calls (the first and last bucket only count what lies in the range). Buckets where nothing happened are absent. Reads indexes: its cost grows with the events in the range, not with the table. Admin only.
Errors: 22023 for a bucket below 1 second or above 876600 hours, a p_since that is NULL or infinite (one after p_now gives no rows), more than 100000 buckets, or a bad p_now.
Example:
SELECT * FROM backoff.activity(now() - interval ''1 hour'');';

-- backoff.liveness(max_quiet, now): whether the queue's maintenance runs
-- and workers are there, one row (docs/adr/0079). Reap settles stranded
-- leases, rotate keeps the live segments small, fire_schedules fires the
-- schedules: nothing else does, and a queue whose every worker stopped
-- looks like an idle one. The times come from backoff.maintenance, written
-- by those calls at most once every 15 seconds (so they are up to 15 s
-- old), and the current segment's switched_at; the workers seen are those
-- that named themselves to rotate (every Worker does, beside each reap,
-- busy or idle) and those that claimed a job still running, in the minute
-- up to p_now: read from the small table and the lease index, nothing is
-- written for it. The warning says what stopped, in words. Admin only.
CREATE OR REPLACE FUNCTION backoff.liveness(
    p_max_quiet interval DEFAULT interval '10 minutes',
    p_now       timestamptz DEFAULT NULL
)
RETURNS TABLE (
    reap_at          timestamptz,
    rotate_at        timestamptz,
    switch_at        timestamptz,
    truncate_at      timestamptz,
    fire_at          timestamptz,
    active_schedules bigint,
    workers_seen     bigint,
    warning          text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_stale   text[] := '{}';
    v_effects text[] := '{}';
    v_all     boolean := true;
    v_latest  timestamptz;
    v_parts   text[] := '{}';
BEGIN
    IF p_max_quiet IS NULL OR p_max_quiet < interval '0' THEN
        RAISE EXCEPTION 'liveness: max quiet must be 0 or more, got "%"', coalesce(p_max_quiet::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    SELECT max(m.ran_at) FILTER (WHERE m.task = 'reap'), max(m.ran_at) FILTER (WHERE m.task = 'rotate'),
           max(m.ran_at) FILTER (WHERE m.task = 'truncate'), max(m.ran_at) FILTER (WHERE m.task = 'fire_schedules')
    INTO reap_at, rotate_at, truncate_at, fire_at
    FROM backoff.maintenance AS m;
    switch_at := (SELECT s.switched_at FROM backoff.segments AS s WHERE s.current);
    active_schedules := (SELECT count(*) FROM backoff.schedules AS s WHERE NOT s.paused);
    SELECT count(*) INTO workers_seen
    FROM (SELECT w.worker FROM backoff.maintenance_workers AS w
          WHERE w.seen_at > p_now - interval '1 minute'
          UNION
          -- Only running jobs have a lease: jobs_lease_idx.
          SELECT j.locked_by FROM backoff.jobs AS j
          WHERE j.lease_until IS NOT NULL AND j.locked_by IS NOT NULL
            AND j.last_attempted_at > p_now - interval '1 minute') AS seen;

    -- What has not run within p_max_quiet, in words.
    IF reap_at IS NULL OR p_now - reap_at > p_max_quiet THEN
        v_stale := v_stale || coalesce('reap last ran ' || backoff._span_text(p_now - reap_at) || ' ago', 'reap never ran');
        v_effects := v_effects || 'expired leases stay stranded'::text;
    ELSE
        v_all := false;
    END IF;
    IF rotate_at IS NULL OR p_now - rotate_at > p_max_quiet THEN
        v_stale := v_stale || coalesce('rotate last ran ' || backoff._span_text(p_now - rotate_at) || ' ago', 'rotate never ran');
        v_effects := v_effects || 'the live segments are not rotated'::text;
    ELSE
        v_all := false;
    END IF;
    IF active_schedules > 0 AND (fire_at IS NULL OR p_now - fire_at > p_max_quiet) THEN
        v_stale := v_stale || coalesce('schedules last fired ' || backoff._span_text(p_now - fire_at) || ' ago',
                                       'schedules never fired');
        v_effects := v_effects || CASE WHEN active_schedules = 1 THEN 'the active schedule fires nothing'
                                       ELSE pg_catalog.format('%s active schedules fire nothing', active_schedules) END;
    ELSIF active_schedules > 0 THEN
        v_all := false;
    END IF;
    IF cardinality(v_stale) > 0 THEN
        v_latest := (SELECT max(t) FROM unnest(ARRAY[reap_at, rotate_at,
                                                     CASE WHEN active_schedules > 0 THEN fire_at END]) AS t);
        v_parts := v_parts || pg_catalog.format('%s: %s (%s)',
            CASE
                WHEN NOT v_all THEN 'part of the maintenance stopped'
                WHEN v_latest IS NULL THEN 'no maintenance has ever run'
                ELSE 'no maintenance ran for ' || backoff._span_text(p_now - v_latest)
            END,
            pg_catalog.array_to_string(v_stale, ', '), pg_catalog.array_to_string(v_effects, ', '));
    END IF;
    IF workers_seen = 0 THEN
        v_parts := v_parts || 'no worker was seen in the last minute'::text;
    END IF;
    warning := nullif(pg_catalog.array_to_string(v_parts, '; '), '');
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.liveness(interval, timestamptz) IS
'Whether the maintenance runs and workers are there, one row (docs/adr/0079): reap_at, rotate_at and fire_at = when backoff.reap, backoff.rotate and backoff.fire_schedules last ran (recorded at most once every 15 seconds, so up to 15 s old; NULL: never), switch_at = when the current segment became current (rotate''s last switch, or the install), truncate_at = when rotate last truncated a segment (NULL: never), active_schedules = schedules not paused, workers_seen = the workers seen in the minute up to p_now: those that named themselves to backoff.rotate (p_worker; the Go, Python and TypeScript Workers do at every reap interval, busy or idle) and those that claimed a job that is still running. warning (NULL when all is well) says, in words, which of reap, rotate and (with active schedules) fire_schedules has not run within p_max_quiet (default 10 minutes) and what that leaves undone, and that no worker was seen in the last minute. Nothing is written by it, and claim and complete write nothing for it. Admin only.
Errors: 22023 for a p_max_quiet that is NULL or negative, or a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.reap(p_now => ''2030-01-01 00:00+00'');
SELECT moved FROM backoff.rotate(p_now => ''2030-01-01 00:00+00'', p_worker => ''worker-1'');
SELECT reap_at, rotate_at, workers_seen, warning FROM backoff.liveness(p_now => ''2030-01-01 00:00:30+00'');
SELECT warning FROM backoff.liveness(p_now => ''2030-01-01 00:20+00'');';

-- backoff.health(max_age, now): one row that tells an operator whether
-- vacuum can keep up with the queue. Dead row versions of finished work are
-- removable only once no snapshot in the database can still see them: one
-- old snapshot (a session idle in a transaction, a long report, a prepared
-- transaction, a replication slot, a standby's hot_standby_feedback through
-- its walsender) keeps them all, and every claim then walks them. This
-- names the oldest such holder, how long it has held (for a slot, which has
-- no start time, its age in transactions), and the dead tuples and last
-- vacuum of the job tables, with a warning when the holder is older than
-- p_max_age or p_max_xid_age transactions (the only measure a slot has).
--
-- It reads pg_stat_activity, which shows another role's backend_xmin only
-- to members of pg_read_all_stats: SECURITY DEFINER as backoff_owner, which
-- migration 005 makes a member where the installer may grant it; without
-- it the warning says so instead of reporting a clean horizon it cannot
-- see. The query texts of other sessions are never returned.
-- It also says whether the maintenance runs and workers are there, as
-- backoff.liveness reads it (docs/adr/0079): a queue whose every worker
-- stopped otherwise looks like an idle one. Admin only.
CREATE OR REPLACE FUNCTION backoff.health(
    p_max_age     interval DEFAULT interval '5 minutes',
    p_max_xid_age integer DEFAULT 1000000,
    p_now         timestamptz DEFAULT NULL,
    p_max_quiet   interval DEFAULT interval '10 minutes'
)
RETURNS TABLE (
    holder_kind        text,
    holder_pid         integer,
    holder_name        text,
    holder_user        text,
    holder_state       text,
    holder_since       timestamptz,
    holder_age         interval,
    holder_xid_age     integer,
    jobs_live_tuples   bigint,
    jobs_dead_tuples   bigint,
    jobs_last_vacuum   timestamptz,
    jobs_bytes         bigint,
    warning            text,
    reap_at            timestamptz,
    rotate_at          timestamptz,
    switch_at          timestamptz,
    truncate_at        timestamptz,
    fire_at            timestamptz,
    active_schedules   bigint,
    workers_seen       bigint,
    liveness_warning   text,
    segments           integer,
    segments_waiting   integer,
    segments_waiting_bytes bigint,
    segments_held_by   text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_sees_all boolean := pg_catalog.pg_has_role('backoff_owner', 'pg_read_all_stats', 'USAGE');
    v_waiting  pg_catalog.oid[];  -- the segments not current that still take space
BEGIN
    IF p_max_age IS NULL OR p_max_age < interval '0' THEN
        RAISE EXCEPTION 'health: max age must be 0 or more, got "%"', coalesce(p_max_age::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_xid_age IS NULL OR p_max_xid_age < 0 THEN
        RAISE EXCEPTION 'health: max transaction age must be 0 or more, got "%"', coalesce(p_max_xid_age::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_quiet IS NULL OR p_max_quiet < interval '0' THEN
        RAISE EXCEPTION 'health: max quiet must be 0 or more, got "%"', coalesce(p_max_quiet::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    SELECT l.reap_at, l.rotate_at, l.switch_at, l.truncate_at, l.fire_at, l.active_schedules, l.workers_seen, l.warning
    INTO reap_at, rotate_at, switch_at, truncate_at, fire_at, active_schedules, workers_seen, liveness_warning
    FROM backoff.liveness(p_max_quiet, p_now) AS l;

    -- The oldest holder of the xmin horizon of this database. Sessions of
    -- other databases do not hold back this database's tables; walsenders
    -- (no database) do, for hot_standby_feedback. A backend still starting
    -- (no database yet either) holds an xmin only while it reads the
    -- catalogs to log in: no snapshot anyone keeps.
    SELECT h.kind, h.pid, h.name, h.usr, h.state, h.since, h.xid_age
    INTO holder_kind, holder_pid, holder_name, holder_user, holder_state, holder_since, holder_xid_age
    FROM (
        SELECT 'session'::text AS kind, a.pid, a.application_name AS name, a.usename::text AS usr,
               a.state, a.xact_start AS since,
               pg_catalog.age(coalesce(a.backend_xmin, a.backend_xid)) AS xid_age
        FROM pg_catalog.pg_stat_activity AS a
        WHERE coalesce(a.backend_xmin, a.backend_xid) IS NOT NULL
          AND a.pid <> pg_catalog.pg_backend_pid()
          AND (a.datname = pg_catalog.current_database() OR a.backend_type = 'walsender')
        UNION ALL
        SELECT 'replication slot', s.active_pid, s.slot_name::text, NULL, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
               NULL, pg_catalog.age(s.xmin)
        FROM pg_catalog.pg_replication_slots AS s
        WHERE s.xmin IS NOT NULL
        UNION ALL
        SELECT 'prepared transaction', NULL, p.gid, p.owner::text, 'prepared', p.prepared,
               pg_catalog.age(p.transaction)
        FROM pg_catalog.pg_prepared_xacts AS p
        WHERE p.database = pg_catalog.current_database()
    ) AS h
    ORDER BY h.xid_age DESC, h.since
    LIMIT 1;
    holder_age := p_now - holder_since;

    SELECT sum(t.n_live_tup)::bigint, sum(t.n_dead_tup)::bigint,
           max(greatest(t.last_vacuum, t.last_autovacuum)),
           sum(pg_catalog.pg_total_relation_size(t.relid))::bigint
    INTO jobs_live_tuples, jobs_dead_tuples, jobs_last_vacuum, jobs_bytes
    FROM pg_catalog.pg_stat_user_tables AS t
    -- Its partitions (docs/adr/0061): the parent has no rows of its own.
    WHERE t.relid IN (SELECT p.relid FROM pg_catalog.pg_partition_tree('backoff.jobs'::pg_catalog.regclass) AS p
                      WHERE p.isleaf);

    -- The live segments (docs/adr/0082), and those not current that still
    -- take space: one just switched from waits for the next rotate; more
    -- wait for a transaction that read backoff.jobs, named here by the
    -- locks it holds on them.
    SELECT count(*)::integer,
           pg_catalog.array_agg(w.rel::pg_catalog.oid) FILTER (WHERE w.waits)
    INTO segments, v_waiting
    FROM (SELECT r.rel, NOT s.current AND pg_catalog.pg_relation_size(r.rel) > 0 AS waits
          FROM backoff.segments AS s,
               LATERAL (SELECT pg_catalog.format('backoff.jobs_live_%s', s.segment)::pg_catalog.regclass AS rel) AS r) AS w;
    segments_waiting := coalesce(pg_catalog.cardinality(v_waiting), 0);
    SELECT coalesce(sum(pg_catalog.pg_total_relation_size(r)), 0)::bigint
    INTO segments_waiting_bytes
    FROM pg_catalog.unnest(v_waiting) AS r;
    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.format('pid %s (%s)', l.pid,
                                     coalesce(pg_catalog.quote_literal(NULLIF(a.application_name, '')), 'no name')), ', ')
    INTO segments_held_by
    FROM pg_catalog.pg_locks AS l
    LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
    WHERE l.locktype = 'relation' AND l.granted AND l.pid <> pg_catalog.pg_backend_pid()
      AND l.relation = ANY (v_waiting);

    IF holder_age > p_max_age OR holder_xid_age > p_max_xid_age THEN
        warning := pg_catalog.format(
            'a %s (%s%s, user %s, %s) has held a snapshot%s, %s transactions behind: vacuum cannot remove the job versions that finished since (%s dead now), and every claim walks them',
            holder_kind, coalesce('pid ' || holder_pid || ', ', ''), coalesce(pg_catalog.quote_literal(holder_name), 'no name'),
            coalesce(holder_user, 'unknown'), holder_state,
            coalesce(' for ' || pg_catalog.to_char(holder_age, 'FMHH24"h"MI"m"SS"s"'), ''),
            holder_xid_age, coalesce(jobs_dead_tuples, 0));
    ELSIF NOT v_sees_all THEN
        warning := 'backoff_owner is not a member of pg_read_all_stats: sessions of other roles that hold back vacuum are not visible here (GRANT pg_read_all_stats TO backoff_owner)';
    END IF;
    IF segments_waiting > 1 AND segments_held_by IS NOT NULL THEN
        warning := pg_catalog.concat_ws('; ', warning, pg_catalog.format(
            '%s live segments (%s) wait to be truncated while %s holds them (a transaction that read backoff.jobs): claims are not slowed, and the space is given back when it ends',
            segments_waiting, pg_catalog.pg_size_pretty(segments_waiting_bytes), segments_held_by));
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.health(interval, integer, timestamptz, interval) IS
'Whether vacuum keeps up with the queue, one row: the oldest holder of the database''s xmin horizon (holder_kind session, replication slot or prepared transaction; its pid, application or slot name or gid, user, state, since when and for how long, and its age in transactions), the live and dead tuples, last vacuum (manual or auto) and size with indexes of backoff.jobs, and a warning when live segments wait for a transaction that read backoff.jobs (below) or when the holder has held longer than p_max_age or is more than p_max_xid_age transactions old (a replication slot has no start time: only its age in transactions counts), or when backoff_owner cannot see other roles'' sessions. While a snapshot is held, vacuum can remove no job version that finished after it, and claims slow down as they walk them. No query text is returned. Then whether the maintenance runs and workers are there, as backoff.liveness(p_max_quiet, p_now) reads it: reap_at, rotate_at and fire_at (when reap, rotate and fire_schedules last ran, to within 15 s; NULL: never), switch_at (when the current segment became current), truncate_at (rotate''s last truncate), active_schedules, workers_seen (in the last minute) and liveness_warning, which names what has not run within p_max_quiet (default 10 minutes) and says when no worker was seen in the last minute (NULL when all is well). Then the live segments of backoff.jobs (docs/adr/0082): segments (3, more while rotate has added some), segments_waiting (those not current that still take space: one just switched from, until the next rotate; more while a transaction that read backoff.jobs holds them, which rotate cannot truncate), segments_waiting_bytes (their size with indexes, given back once they are truncated) and segments_held_by (the sessions holding a lock on them, as pid and application name; NULL: none). Admin only.
Errors: 22023 for a p_max_age, p_max_xid_age or p_max_quiet that is NULL or negative, or a p_now outside the accepted range.
Example:
SELECT warning FROM backoff.health(p_max_age => interval ''1 hour'', p_max_xid_age => 2000000000);
SELECT reap_at, rotate_at, workers_seen, liveness_warning FROM backoff.health(p_max_quiet => interval ''2 minutes'');';

-- backoff.unfinished_job(queues): one job of the given queues (every queue
-- for NULL) that has not finished, or no row: what a caller that waits for
-- its queues to drain asks (the Go client's WaitIdle). Two branches, so
-- that each reads a partial index whatever the table's size: pending and
-- retrying jobs from jobs_claimable_idx, running ones from jobs_lease_idx
-- (lease_until is set exactly while a job runs). Scoped like backoff.job:
-- a caller sees only the queues it may work on, so a definer function, not
-- a read of the table (docs/adr/0058-queue-scope-fails-closed.md).
CREATE OR REPLACE FUNCTION backoff.unfinished_job(p_queues text[] DEFAULT NULL)
RETURNS TABLE (queue text, status text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_scope text[];
BEGIN
    v_scope := backoff._work_scope();
    RETURN QUERY
    SELECT u.queue, u.status
    FROM ((SELECT j.queue, j.status FROM backoff.jobs AS j
           WHERE j.status IN ('pending', 'retrying')
             AND (p_queues IS NULL OR j.queue = ANY (p_queues))
             AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
           LIMIT 1)
          UNION ALL
          (SELECT j.queue, j.status FROM backoff.jobs AS j
           WHERE j.lease_until IS NOT NULL
             AND (p_queues IS NULL OR j.queue = ANY (p_queues))
             AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
           LIMIT 1)) AS u
    LIMIT 1;
END
$$;

COMMENT ON FUNCTION backoff.unfinished_job(text[]) IS
'One job of the queues p_queues (every queue when NULL) that is pending, running or retrying, whatever its run_at, as (queue, status); no row when they have none: the queues are drained. A caller scoped by backoff.grant_queue sees only the queues it may work on. The Go client''s WaitIdle polls it. Producers, workers and admins.
Example:
SELECT * FROM backoff.unfinished_job(ARRAY[''emails'']);';

-- backoff.queue_list(): every queue, configured (backoff.queues) or only
-- seen in jobs, one row each, without reading every job: a loose index
-- scan (one probe per queue) over the live jobs (jobs_claimable_idx) and
-- the finished ones (jobs_finished_idx), and the running ones
-- (jobs_lease_idx, as many rows as jobs run). Every job is in one of the
-- three: finished jobs have completed_at, running ones a lease. A definer
-- function, so that a worker lists queues without reading the jobs table
-- (docs/adr/0058): the configured queues for everyone (workers read
-- backoff.queues), the queues only seen in jobs within the caller's scope.
-- Intervals as whole microseconds, for the clients.
CREATE OR REPLACE FUNCTION backoff.queue_list()
RETURNS TABLE (
    name                   text,
    policy                 text,
    paused                 boolean,
    configured             boolean,
    rate                   double precision,
    burst                  integer,
    breaker_failures       integer,
    breaker_window_us      bigint,
    breaker_cooldown_us    bigint,
    breaker_probes         integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_scope text[];
BEGIN
    v_scope := backoff._work_scope();
    RETURN QUERY
    WITH RECURSIVE live (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.status IN ('pending', 'retrying') ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j WHERE j.status IN ('pending', 'retrying') AND j.queue > l.name
                ORDER BY j.queue LIMIT 1)
        FROM live AS l WHERE l.name IS NOT NULL
    ), finished (name) AS (
        (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
        UNION ALL
        SELECT (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL AND j.queue > f.name
                ORDER BY j.queue LIMIT 1)
        FROM finished AS f WHERE f.name IS NOT NULL
    ), seen AS (
        SELECT l.name FROM live AS l WHERE l.name IS NOT NULL
        UNION SELECT f.name FROM finished AS f WHERE f.name IS NOT NULL
        UNION SELECT j.queue FROM backoff.jobs AS j WHERE j.lease_until IS NOT NULL
    )
    SELECT q.name, q.policy, q.paused, true, q.rate, q.burst, q.breaker_failures,
        (extract(epoch FROM q.breaker_window) * 1000000)::bigint,
        (extract(epoch FROM q.breaker_cooldown) * 1000000)::bigint, q.breaker_probes
    FROM backoff.queues AS q
    UNION ALL
    SELECT s.name, backoff.job_policy(NULL, s.name), false, false, NULL, NULL, NULL, NULL, NULL, 1
    FROM seen AS s
    WHERE NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = s.name)
      AND (v_scope IS NULL OR s.name OPERATOR(pg_catalog.~~) ANY (v_scope))
    ORDER BY 1;
END
$$;

COMMENT ON FUNCTION backoff.queue_list() IS
'Every queue by name: those configured in backoff.queues (configured true, with policy, paused, rate, burst and breaker settings, the breaker''s window and cooldown in microseconds) and those only seen in jobs (configured false, the policy that applies to them, nothing else), without reading every job (one index probe per queue). A caller scoped by backoff.grant_queue sees every configured queue but only the seen queues it may work on. Workers and admins.
Example:
SELECT name, policy, paused, configured FROM backoff.queue_list();';

-- backoff._job_filter(filters): the WHERE condition over backoff.jobs AS j
-- of the operator's job filters, for the statements that list_jobs and
-- count_jobs run with EXECUTE. Only the filters that are set appear, and
-- statuses are literals (six known names), so that each statement is
-- planned for its own filters and the planner can prove the predicates of
-- the partial indexes: dead letters and cancelled jobs (and a dead-letter
-- reason) read jobs_dead_idx or jobs_dead_letters_idx, finished jobs
-- jobs_finished_idx, running ones jobs_lease_idx. A single statement with
-- "p IS NULL OR ..." for every filter would be one plan for all of them,
-- and a cached generic plan loses those indexes. The values are not
-- written in: the condition names the statement's parameters $1 (queue),
-- $2 (effective policy), $3 (dead-letter reason), $4 and $5 (created_at
-- range), $6 and $7 (completed_at range) and $8 (the schedule that
-- enqueued the job), which the caller passes in that order with USING.
CREATE OR REPLACE FUNCTION backoff._job_filter(
    p_queue              text,
    p_statuses           text[],
    p_policy             text,
    p_dead_letter_reason text,
    p_created_from       timestamptz,
    p_created_to         timestamptz,
    p_finished_from      timestamptz,
    p_finished_to        timestamptz,
    p_schedule           text
)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_where    text[] := ARRAY['true'];
    v_status   text;
    v_lits     text[] := '{}';
    v_finished boolean := true;
    v_running  boolean := true;
BEGIN
    IF p_queue IS NOT NULL THEN
        v_where := v_where || 'j.queue = $1'::text;
    END IF;
    IF p_statuses IS NOT NULL THEN
        FOREACH v_status IN ARRAY p_statuses LOOP
            IF v_status IS NULL OR v_status NOT IN ('pending', 'running', 'retrying', 'blocked', 'completed', 'dead_lettered', 'cancelled') THEN
                RAISE EXCEPTION 'unknown status "%"', coalesce(v_status, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_lits := v_lits || pg_catalog.quote_literal(v_status);
            v_finished := v_finished AND v_status IN ('completed', 'dead_lettered', 'cancelled');
            v_running := v_running AND v_status = 'running';
        END LOOP;
        IF pg_catalog.cardinality(v_lits) = 0 THEN
            v_where := v_where || 'false'::text;
        ELSE
            v_where := v_where || ('j.status IN (' || pg_catalog.array_to_string(v_lits, ', ') || ')');
            IF v_finished THEN
                v_where := v_where || 'j.completed_at IS NOT NULL'::text;
            END IF;
            IF v_running THEN
                v_where := v_where || 'j.lease_until IS NOT NULL'::text;
            END IF;
        END IF;
    END IF;
    IF p_policy IS NOT NULL THEN
        v_where := v_where || 'backoff.job_policy(j.policy, j.queue) = $2'::text;
    END IF;
    IF p_dead_letter_reason IS NOT NULL THEN
        -- Only dead letters have a reason: say so, for the partial indexes.
        v_where := v_where || ARRAY['j.dead_letter_reason = $3', 'j.status = ''dead_lettered''', 'j.completed_at IS NOT NULL'];
    END IF;
    IF p_created_from IS NOT NULL THEN
        v_where := v_where || 'j.created_at >= $4'::text;
    END IF;
    IF p_created_to IS NOT NULL THEN
        v_where := v_where || 'j.created_at < $5'::text;
    END IF;
    IF p_finished_from IS NOT NULL THEN
        v_where := v_where || 'j.completed_at >= $6'::text;
    END IF;
    IF p_finished_to IS NOT NULL THEN
        v_where := v_where || 'j.completed_at < $7'::text;
    END IF;
    IF p_schedule IS NOT NULL THEN
        -- Implies schedule IS NOT NULL: the partial index of a schedule's
        -- slots (jobs_*_schedule_slot_idx) serves it.
        v_where := v_where || 'j.schedule = $8'::text;
    END IF;
    RETURN pg_catalog.array_to_string(v_where, ' AND ');
END
$$;

-- backoff.list_jobs(filters, order, cursor, limit): one page of jobs for an
-- operator (backoffctl jobs list, the web UI's job pages, psql), with what
-- governs each job now (its effective policy and attempts allowed). Pages
-- are keyset pages: the cursor is the last job of the previous page (its
-- id, and its completed_at for the order 'finished'), never an OFFSET, so
-- a page costs the same wherever it is. The statement is written for the
-- filters that are set (backoff._job_filter) and run with EXECUTE, which
-- plans it with the values at every call: each filter keeps the partial
-- index it needs, as a cached generic plan would not. The order
-- 'finished' over every queue merges each queue's newest finished jobs (a
-- loose index scan over jobs_finished_idx) rather than sorting every
-- finished job. Text in the last error has no index: with p_error_contains
-- the page examines at most p_scan_limit jobs, and when that bound stopped
-- it short of p_limit matches a last row with scan_end true, the last job
-- it examined (which does not match), says where to continue from. A
-- schedule's page lists its jobs with p_schedule (the index of its slots
-- serves it). No JIT: many small index probes whose estimated cost passes
-- jit_above_cost (docs/adr/0053). Admin only: it shows every queue's jobs
-- and their payloads (docs/adr/0072).
CREATE OR REPLACE FUNCTION backoff.list_jobs(
    p_queue               text DEFAULT NULL,
    p_statuses            text[] DEFAULT NULL,
    p_policy              text DEFAULT NULL,
    p_dead_letter_reason  text DEFAULT NULL,
    p_error_contains      text DEFAULT NULL,
    p_created_from        timestamptz DEFAULT NULL,
    p_created_to          timestamptz DEFAULT NULL,
    p_finished_from       timestamptz DEFAULT NULL,
    p_finished_to         timestamptz DEFAULT NULL,
    p_schedule            text DEFAULT NULL,
    p_order               text DEFAULT 'oldest',
    p_after_id            bigint DEFAULT NULL,
    p_after_completed_at  timestamptz DEFAULT NULL,
    p_limit               integer DEFAULT 100,
    p_payloads            boolean DEFAULT true,
    p_scan_limit          integer DEFAULT 5000
)
RETURNS TABLE (
    id                     bigint,
    queue                  text,
    payload                jsonb,
    status                 text,
    priority               integer,
    attempts               integer,
    uncounted_attempts     integer,
    max_attempts           integer,
    policy                 text,
    run_at                 timestamptz,
    lease_until            timestamptz,
    locked_by              text,
    last_attempted_at      timestamptz,
    last_failed_at         timestamptz,
    last_error             text,
    errors                 jsonb,
    dead_letter_reason     text,
    dedupe_key             text,
    created_at             timestamptz,
    completed_at           timestamptz,
    schedule               text,
    schedule_slot          timestamptz,
    effective_policy       text,
    effective_max_attempts integer,
    scan_end               boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_order   text[];
    v_cond    text;
    v_bound   integer := p_limit;
    v_source  text;
    v_with    text := '';
    v_from    text;
    v_n       bigint;
    v_last_id bigint;
    v_seen    bigint;
BEGIN
    -- Each order's ORDER BY, its reverse, and its cursor condition ($9:
    -- the cursor's id, $10: its completion time; $1 to $8 are the
    -- filters of backoff._job_filter).
    v_order := CASE p_order
        WHEN 'oldest' THEN ARRAY['j.id', 'j.id DESC', 'j.id > $9']
        WHEN 'newest' THEN ARRAY['j.id DESC', 'j.id', 'j.id < $9']
        WHEN 'finished' THEN ARRAY['j.completed_at DESC, j.id DESC', 'j.completed_at, j.id', '(j.completed_at, j.id) < ($10, $9)']
    END;
    IF v_order IS NULL THEN
        RAISE EXCEPTION 'list jobs: order must be oldest, newest or finished, got "%"', coalesce(p_order, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'list jobs: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_scan_limit IS NULL OR p_scan_limit < 1 THEN
        RAISE EXCEPTION 'list jobs: scan limit must be at least 1, got "%"', coalesce(p_scan_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_order = 'finished' AND (p_after_id IS NULL) <> (p_after_completed_at IS NULL) THEN
        RAISE EXCEPTION 'list jobs: the order finished continues after an id and a completion time, got "%" and "%"',
            coalesce(p_after_id::text, 'NULL'), coalesce(p_after_completed_at::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cond := backoff._job_filter(p_queue, p_statuses, p_policy, p_dead_letter_reason,
                                  p_created_from, p_created_to, p_finished_from, p_finished_to, p_schedule);
    IF p_order = 'finished' THEN
        v_cond := v_cond || ' AND j.completed_at IS NOT NULL';
    END IF;
    IF p_after_id IS NOT NULL THEN
        v_cond := v_cond || ' AND ' || v_order[3];
    END IF;
    IF p_error_contains IS NOT NULL THEN
        v_bound := p_scan_limit;
    END IF;
    -- $11: the bound of the jobs the filters select.
    v_source := 'SELECT j.* FROM backoff.jobs AS j WHERE ' || v_cond || ' ORDER BY ' || v_order[1] || ' LIMIT $11';
    IF p_order = 'finished' AND p_queue IS NULL THEN
        v_with := 'WITH RECURSIVE qs (name) AS (
    (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL AND j.queue > qs.name
            ORDER BY j.queue LIMIT 1)
    FROM qs WHERE qs.name IS NOT NULL
) ';
        v_source := 'SELECT m.* FROM qs CROSS JOIN LATERAL (SELECT j.* FROM backoff.jobs AS j WHERE j.queue = qs.name AND '
            || v_cond || ' ORDER BY ' || v_order[1] || ' LIMIT $11) AS m WHERE qs.name IS NOT NULL ORDER BY '
            || pg_catalog.replace(v_order[1], 'j.', 'm.') || ' LIMIT $11';
    END IF;
    -- A value that is not selected is never detoasted nor sent: without
    -- payloads the rows weigh a few hundred bytes whatever the payloads.
    -- %1$s: the jobs, %2$s: scan_end.
    v_from := 'SELECT j.id, j.queue, '
        || CASE WHEN p_payloads THEN 'j.payload' ELSE 'NULL::jsonb' END
        || ', j.status, j.priority, j.attempts, j.uncounted_attempts, j.max_attempts, j.policy, j.run_at, '
        || 'j.lease_until, j.locked_by, j.last_attempted_at, j.last_failed_at, j.last_error, '
        || CASE WHEN p_payloads THEN 'j.errors' ELSE 'NULL::jsonb' END
        || ', j.dead_letter_reason, j.dedupe_key, j.created_at, j.completed_at, j.schedule, j.schedule_slot, '
        || 'gp.name, coalesce(j.max_attempts, p.max_attempts, 0), %2$s '
        || 'FROM (%1$s) AS j '
        || 'CROSS JOIN LATERAL (SELECT backoff.job_policy(j.policy, j.queue) AS name) AS gp '
        || 'LEFT JOIN backoff.policies AS p ON p.name = gp.name ';
    IF p_error_contains IS NULL THEN
        RETURN QUERY EXECUTE v_with || pg_catalog.format(v_from, v_source, 'false') || 'ORDER BY ' || v_order[1]
            USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
                  p_finished_from, p_finished_to, p_schedule, p_after_id, p_after_completed_at, v_bound;
        RETURN;
    END IF;
    -- $12: the text, $13: the page's limit.
    RETURN QUERY EXECUTE v_with || pg_catalog.format(v_from, v_source, 'false')
        || 'WHERE pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower($12)) > 0 ORDER BY '
        || v_order[1] || ' LIMIT $13'
        USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
              p_finished_from, p_finished_to, p_schedule, p_after_id, p_after_completed_at, v_bound, p_error_contains, p_limit;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n >= p_limit THEN
        RETURN;
    END IF;
    -- Fewer matches than the page: did the search stop at its bound? Then
    -- the last job it examined follows, marked, as the cursor to go on.
    EXECUTE v_with || 'SELECT j.id, count(*) OVER () FROM (' || v_source || ') AS j ORDER BY '
        || v_order[2] || ' LIMIT 1'
        INTO v_last_id, v_seen
        USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
              p_finished_from, p_finished_to, p_schedule, p_after_id, p_after_completed_at, v_bound;
    IF v_seen >= p_scan_limit THEN
        RETURN QUERY EXECUTE pg_catalog.format(v_from, 'SELECT j.* FROM backoff.jobs AS j WHERE j.id = $1', 'true')
            USING v_last_id;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.list_jobs(text, text[], text, text, text, timestamptz, timestamptz, timestamptz, timestamptz, text, text, bigint, timestamptz, integer, boolean, integer) IS
'One page of jobs, at most p_limit (default 100), for an operator: the columns of backoff.jobs (schedule and schedule_slot: the schedule that enqueued the job and its slot, NULL for a manual fire by backoff.trigger_schedule), effective_policy (backoff.job_policy) and effective_max_attempts (max_attempts, else the policy''s, else 0). NULL filters do not filter: p_queue; p_statuses (an empty array matches nothing); p_policy, the effective policy; p_dead_letter_reason; p_error_contains, case-insensitive text in last_error; created_at in [p_created_from, p_created_to); completed_at in [p_finished_from, p_finished_to); p_schedule, the schedule that enqueued the job (its slots and manual fires; a schedule''s page lists them with p_order ''newest''). p_order: ''oldest'' (id ascending, the default), ''newest'' (id descending) or ''finished'' (finished jobs only, completed_at descending then id). Keyset pages: the next page passes the last row''s id as p_after_id (and its completed_at as p_after_completed_at for ''finished''); ask for one row more than shown to learn whether there is a next page. p_payloads false returns payload and errors NULL (light rows for a listing). p_error_contains has no index: the page examines at most p_scan_limit (default 5000) jobs, and when it stopped there with fewer than p_limit matches a last row with scan_end true is the last job examined, which does not match: the cursor to continue the search from. Every other row has scan_end false. An index serves each other filter, so a page reads about as many rows as it returns. Admin only.
Errors: 22023 for an unknown order or status, a p_limit or p_scan_limit below 1, or the order finished with only one of p_after_id and p_after_completed_at.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT backoff.put_schedule(''hourly-sync'', ''sync'', p_every => ''1 hour'', p_now => ''2026-01-01 00:00+00'');
SELECT count(*) FROM backoff.fire_schedules(p_now => ''2026-01-01 01:00+00'');
SELECT count(*) FROM backoff.trigger_schedule(''hourly-sync'', p_now => ''2026-01-01 01:30+00'');
SELECT id, queue, status, schedule_slot, effective_policy FROM backoff.list_jobs(p_statuses => ''{pending}'', p_schedule => ''hourly-sync'', p_order => ''newest'', p_limit => 20);';

-- backoff.count_jobs(filters, limit): how many jobs the operator's filters
-- match, up to a bound: the number a confirmation of a bulk action names
-- (backoff.bulk_jobs takes the same filters). Written for the filters
-- that are set and run with EXECUTE, as backoff.list_jobs is, so that the
-- partial indexes serve them. No JIT (docs/adr/0053). Admin only.
CREATE OR REPLACE FUNCTION backoff.count_jobs(
    p_queue              text DEFAULT NULL,
    p_statuses           text[] DEFAULT NULL,
    p_policy             text DEFAULT NULL,
    p_dead_letter_reason text DEFAULT NULL,
    p_error_contains     text DEFAULT NULL,
    p_error_signature    text DEFAULT NULL,
    p_created_from       timestamptz DEFAULT NULL,
    p_created_to         timestamptz DEFAULT NULL,
    p_finished_from      timestamptz DEFAULT NULL,
    p_finished_to        timestamptz DEFAULT NULL,
    p_schedule           text DEFAULT NULL,
    p_limit              bigint DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_cond text;
    v_n    bigint;
BEGIN
    IF p_limit < 0 THEN
        RAISE EXCEPTION 'count jobs: limit must be 0 or more, got "%"', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cond := backoff._job_filter(p_queue, p_statuses, p_policy, p_dead_letter_reason,
                                  p_created_from, p_created_to, p_finished_from, p_finished_to, p_schedule);
    IF p_error_contains IS NOT NULL THEN
        v_cond := v_cond || ' AND pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower($9)) > 0';
    END IF;
    IF p_error_signature IS NOT NULL THEN
        v_cond := v_cond || ' AND backoff._error_signature(j.last_error) = $10';
    END IF;
    EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM backoff.jobs AS j WHERE ' || v_cond || ' LIMIT $11) AS m'
        INTO v_n
        USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
              p_finished_from, p_finished_to, p_schedule, p_error_contains, p_error_signature, nullif(p_limit, 0);
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION backoff.count_jobs(text, text[], text, text, text, text, timestamptz, timestamptz, timestamptz, timestamptz, text, bigint) IS
'How many jobs match the filter, counting at most p_limit (NULL or 0: no bound): the filters of backoff.list_jobs (NULL filters do not filter; p_schedule among them) and p_error_signature, which compares backoff.error_signature(last_error) (no index: it reads each job the other filters select). The number a confirmation of backoff.bulk_jobs names. Admin only.
Errors: 22023 for an unknown status or a negative p_limit.
Example:
SELECT backoff.enqueue(''emails'');
SELECT backoff.count_jobs(p_queue => ''emails'', p_statuses => ''{pending, retrying}'', p_limit => 1000);';

-- backoff.job_detail(job id, payload chars): one job as an operator sees
-- it (backoffctl jobs show, the web UI's job page): the row, its error
-- history, and what governs it now (the policy backoff.job_policy names,
-- the attempts allowed). With p_payload_chars the payload comes as the
-- start of its text only, with its size, so that a payload of many
-- megabytes neither travels nor sits in a page's memory. One primary-key
-- probe, never worth compiling (no JIT, as for the other reads). Admin only: it shows any queue's payload (docs/adr/0072).
CREATE OR REPLACE FUNCTION backoff.job_detail(p_job_id bigint, p_payload_chars integer DEFAULT NULL)
RETURNS TABLE (
    id                     bigint,
    queue                  text,
    payload                jsonb,
    status                 text,
    priority               integer,
    attempts               integer,
    uncounted_attempts     integer,
    max_attempts           integer,
    policy                 text,
    run_at                 timestamptz,
    lease_until            timestamptz,
    locked_by              text,
    last_attempted_at      timestamptz,
    last_failed_at         timestamptz,
    last_error             text,
    errors                 jsonb,
    dead_letter_reason     text,
    dedupe_key             text,
    created_at             timestamptz,
    completed_at           timestamptz,
    schedule               text,
    schedule_slot          timestamptz,
    effective_policy       text,
    effective_max_attempts integer,
    payload_text           text,
    payload_bytes          bigint,
    payload_truncated      boolean,
    progress               jsonb,
    progress_at            timestamptz,
    parents                bigint[],
    parents_open           integer,
    parents_waiting        integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF p_payload_chars < 1 THEN
        RAISE EXCEPTION 'show job %: payload preview of % characters: want at least 1', p_job_id, p_payload_chars
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT j.id, j.queue, CASE WHEN p_payload_chars IS NULL THEN j.payload END, j.status, j.priority, j.attempts,
           j.uncounted_attempts, j.max_attempts, j.policy, j.run_at, j.lease_until, j.locked_by,
           j.last_attempted_at, j.last_failed_at, j.last_error, j.errors, j.dead_letter_reason, j.dedupe_key,
           j.created_at, j.completed_at, j.schedule, j.schedule_slot, gp.name, coalesce(j.max_attempts, p.max_attempts, 0),
           pg_catalog.left(pt.text, p_payload_chars), pg_catalog.octet_length(pt.text)::bigint,
           pg_catalog.length(pt.text) > p_payload_chars,
           g.progress, g.reported_at,
           ARRAY(SELECT e.parent_id FROM backoff.job_dependencies AS e WHERE e.child_id = j.id ORDER BY e.parent_id),
           b.remaining, b.waiting
    FROM backoff.jobs AS j
    -- Workflows (docs/adr/0087): the last progress reported, the jobs this
    -- one depends on, and while it is blocked how many are still open and
    -- how many failed and wait for an operator.
    LEFT JOIN backoff.job_progress AS g ON g.job_id = j.id
    LEFT JOIN backoff.job_blockers AS b ON b.job_id = j.id AND j.status = 'blocked'
    CROSS JOIN LATERAL (SELECT backoff.job_policy(j.policy, j.queue) AS name) AS gp
    LEFT JOIN backoff.policies AS p ON p.name = gp.name
    -- The payload's text only when a preview is asked for.
    CROSS JOIN LATERAL (SELECT CASE WHEN p_payload_chars IS NOT NULL THEN j.payload::text END AS text) AS pt
    WHERE j.id = p_job_id;
END
$$;

COMMENT ON FUNCTION backoff.job_detail(bigint, integer) IS
'Job p_job_id as an operator sees it: the columns of backoff.jobs (errors: the error history; schedule and schedule_slot: the schedule that enqueued it and its slot, NULL for a manual fire), effective_policy (backoff.job_policy) and effective_max_attempts (max_attempts, else the policy''s, else 0); no row for an unknown id. With p_payload_chars, payload is NULL and payload_text holds the first p_payload_chars characters of the payload''s JSON text (then no longer valid JSON when payload_truncated), payload_bytes the size of the whole text; without, payload is the whole payload and the three are NULL. progress and progress_at: the last progress a heartbeat reported (backoff.heartbeat''s p_progress) and when, NULL if none; parents: the ids of the jobs it depends on (empty if none); parents_open and parents_waiting, while it is blocked: how many parents have not finished yet, and how many failed under a ''wait'' edge and wait for backoff.unblock or a replay (NULL when not blocked). Admin only.
Errors: 22023 for a p_payload_chars below 1.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT id, status, effective_policy, payload_text, payload_bytes FROM backoff.job_detail(1, 200);';

-- backoff.queue_history(queue, limit): the newest pauses and resumes of a
-- queue, or of every queue, from backoff.queue_events (which pause_queue
-- and resume_queue write with the role that asked). A custom plan at every
-- call: with the queue the read walks queue_events_queue_idx backward,
-- without it the table in time order. Admin only, as the table is.
CREATE OR REPLACE FUNCTION backoff.queue_history(p_queue text DEFAULT NULL, p_limit integer DEFAULT 20)
RETURNS TABLE (queue text, action text, role text, at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'queue history: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT e.queue, e.action, e.role, e.at
    FROM backoff.queue_events AS e
    WHERE p_queue IS NULL OR e.queue = p_queue
    ORDER BY e.at DESC, e.id DESC
    LIMIT p_limit;
END
$$;

COMMENT ON FUNCTION backoff.queue_history(text, integer) IS
'The newest p_limit (default 20) pauses and resumes of queue p_queue (NULL: every queue), newest first: the queue, the action (pause or resume), the database role that asked and when. backoff.prune drops them with the finished jobs'' retention. Admin only.
Errors: 22023 for a p_limit below 1.
Example:
SELECT backoff.pause_queue(''emails'', p_create => true);
SELECT queue, action FROM backoff.queue_history(''emails'');';

-- backoff.policy_list(): every retry policy, with its durations as whole
-- microseconds (the resolution of an interval), the shape the clients
-- compute delays with (client/policy in Go). PL/pgSQL, whose plan a
-- session keeps: a SQL function that cannot be inlined (a definer) is
-- planned at every call. Workers and admins, who read backoff.policies
-- anyway.
CREATE OR REPLACE FUNCTION backoff.policy_list()
RETURNS TABLE (
    name               text,
    strategy           text,
    base_us            bigint,
    multiplier         double precision,
    exponent           integer,
    schedule_us        bigint[],
    max_delay_us       bigint,
    jitter             text,
    jitter_ratio       double precision,
    max_attempts       integer,
    lease_us           bigint,
    deadline_us        bigint,
    max_lease_expiries integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT p.name, p.strategy,
           (extract(epoch FROM p.base) * 1000000)::bigint,
           p.multiplier, p.exponent,
           ARRAY(SELECT (extract(epoch FROM s) * 1000000)::bigint
                 FROM pg_catalog.unnest(p.schedule) WITH ORDINALITY AS u(s, i) ORDER BY i),
           (extract(epoch FROM p.max_delay) * 1000000)::bigint,
           p.jitter, p.jitter_ratio, p.max_attempts,
           (extract(epoch FROM p.lease) * 1000000)::bigint,
           (extract(epoch FROM p.deadline) * 1000000)::bigint,
           p.max_lease_expiries
    FROM backoff.policies AS p
    ORDER BY p.name;
END
$$;

COMMENT ON FUNCTION backoff.policy_list() IS
'Every row of backoff.policies by name, durations in microseconds: base_us, schedule_us (in order), max_delay_us, lease_us, and deadline_us (NULL: no deadline); max_lease_expiries NULL: the default. Workers and admins.
Example:
SELECT name, strategy, base_us, max_delay_us, max_attempts FROM backoff.policy_list();';

-- backoff.dead_letter_groups(queue, limit): every dead letter grouped by
-- queue, reason and error signature (backoff.error_signature of the last
-- error), largest group first. It reads every dead letter of the queue,
-- so its cost grows with them: backoff.dead_letter_reasons and
-- backoff.dead_letter_sample are the bounded summary a page that refreshes
-- shows (docs/adr/0055). A custom plan at every call, so that a queue
-- reads only its part of jobs_dead_letters_idx. Admin only.
CREATE OR REPLACE FUNCTION backoff.dead_letter_groups(p_queue text DEFAULT NULL, p_limit integer DEFAULT 200)
RETURNS TABLE (
    queue      text,
    reason     text,
    signature  text,
    count      bigint,
    first_seen timestamptz,
    last_seen  timestamptz,
    example    text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'dead letter groups: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT j.queue, coalesce(j.dead_letter_reason, ''), backoff._error_signature(j.last_error) AS sig,
           pg_catalog.count(*), min(coalesce(j.completed_at, j.created_at)), max(coalesce(j.completed_at, j.created_at)),
           coalesce((pg_catalog.array_agg(j.last_error ORDER BY j.id DESC))[1], '')
    FROM backoff.jobs AS j
    WHERE j.status = 'dead_lettered' AND (p_queue IS NULL OR j.queue = p_queue)
    GROUP BY 1, 2, 3
    ORDER BY 4 DESC, 1, 2, 3
    LIMIT p_limit;
END
$$;

COMMENT ON FUNCTION backoff.dead_letter_groups(text, integer) IS
'The dead letters of queue p_queue (NULL: every queue) grouped by queue, reason ('''' for none) and signature (backoff.error_signature of last_error), largest group first, at most p_limit groups (default 200): count, first_seen and last_seen (when they were dead-lettered) and example, the last error of the group''s newest job, unmasked. Reads every dead letter: backoff.dead_letter_sample is the bounded summary. Admin only.
Errors: 22023 for a p_limit below 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT status FROM backoff.fail(1, 1, ''SMTP 550: mailbox 1234 unknown'', p_retryable => false);
SELECT queue, reason, signature, count FROM backoff.dead_letter_groups(''emails'');';

-- backoff._dead_letter_pairs(queue, limit): the first p_limit (queue,
-- reason) pairs of the dead letters, in (queue, reason) order, by a loose
-- scan of jobs_dead_letters_idx: one probe per pair, not a read of every
-- dead letter (reason may be NULL: the next pair is a greater reason, else
-- the queue's NULL reason, else the next queue). The scan stops at the
-- limit, as a recursive query is evaluated only as far as it is read.
-- Every probe orders by the index's columns: with a bare LIMIT the planner
-- may take a heap or sequential scan (PostgreSQL 14-18 did, estimating the
-- reason's NULLs from the whole table), and the NULL reason's probes order
-- by the reason too (IS NULL is no equality for the planner's orderings).
-- Written with the queue condition only when there is a queue (EXECUTE),
-- so that the probes of one queue start at that queue.
CREATE OR REPLACE FUNCTION backoff._dead_letter_pairs(p_queue text, p_limit bigint)
RETURNS TABLE (queue text, reason text)
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE 'WITH RECURSIVE pairs (queue, reason) AS (
    (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
     WHERE j.status = ''dead_lettered''' || CASE WHEN p_queue IS NOT NULL THEN ' AND j.queue = $1' ELSE '' END || '
     ORDER BY j.queue, j.dead_letter_reason LIMIT 1)
    UNION ALL
    SELECT n.queue, n.reason FROM pairs AS p CROSS JOIN LATERAL (
        SELECT u.queue, u.reason FROM (
            (SELECT j.queue, j.dead_letter_reason AS reason FROM backoff.jobs AS j
             WHERE j.status = ''dead_lettered'' AND p.reason IS NOT NULL
               AND j.queue = p.queue AND j.dead_letter_reason > p.reason
             ORDER BY j.dead_letter_reason LIMIT 1)
            UNION ALL
            (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
             WHERE j.status = ''dead_lettered'' AND p.reason IS NOT NULL
               AND j.queue = p.queue AND j.dead_letter_reason IS NULL
             ORDER BY j.dead_letter_reason LIMIT 1)' || CASE WHEN p_queue IS NULL THEN '
            UNION ALL
            (SELECT j.queue, j.dead_letter_reason FROM backoff.jobs AS j
             WHERE j.status = ''dead_lettered'' AND j.queue > p.queue
             ORDER BY j.queue, j.dead_letter_reason LIMIT 1)' ELSE '' END || ') AS u
        ORDER BY u.queue, u.reason LIMIT 1) AS n
)
SELECT f.queue, f.reason FROM pairs AS f WHERE f.queue IS NOT NULL LIMIT $2'
    USING p_queue, p_limit;
END
$$;

-- backoff.dead_letter_reasons(queue, count limit, pairs): the dead letters
-- counted per queue and reason, the first half of the web UI's
-- dead-letters summary (docs/adr/0055): the pairs by a loose index scan
-- (backoff._dead_letter_pairs), then for each pair its count up to the
-- limit and its first and last completed_at, all index-only reads of
-- jobs_dead_letters_idx. Its cost grows with the pairs and the counts up
-- to their limit, not with the dead letters beyond them. No JIT: many
-- small index probes whose estimated cost passes jit_above_cost (compiled,
-- this read took three times as long at 1,000,000 jobs, and a server
-- whose llvmjit cannot load fails it; docs/adr/0053). A custom plan at
-- every call: the count's bound is then a known LIMIT, for which the
-- planner reads the index in order; as a parameter of a generic plan it
-- guessed a few rows and sorted a bitmap scan's. Admin only.
CREATE OR REPLACE FUNCTION backoff.dead_letter_reasons(
    p_queue       text DEFAULT NULL,
    p_count_limit integer DEFAULT 100000,
    p_pairs       integer DEFAULT 500
)
RETURNS TABLE (
    queue       text,
    reason      text,
    count       bigint,
    count_exact boolean,
    first_seen  timestamptz,
    last_seen   timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_custom_plan
AS $$
BEGIN
    IF p_count_limit IS NULL OR p_count_limit < 1 OR p_pairs IS NULL OR p_pairs < 1 THEN
        RAISE EXCEPTION 'dead letter reasons: count limit and pairs must be at least 1, got "%" and "%"',
            coalesce(p_count_limit::text, 'NULL'), coalesce(p_pairs::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.queue, c.reason, least(c.n, p_count_limit::bigint), c.n <= p_count_limit, c.first_seen, c.last_seen
    FROM (
        SELECT p.queue, p.reason,
            (SELECT pg_catalog.count(*) FROM (
                (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                   AND j.queue = p.queue AND j.dead_letter_reason = p.reason
                   ORDER BY j.completed_at LIMIT p_count_limit::bigint + 1)
                UNION ALL
                (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                   AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL
                   ORDER BY j.dead_letter_reason, j.completed_at LIMIT p_count_limit::bigint + 1)) AS m) AS n,
            coalesce((SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND j.dead_letter_reason = p.reason AND j.completed_at IS NOT NULL
                        ORDER BY j.completed_at LIMIT 1),
                     (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL AND j.completed_at IS NOT NULL
                        ORDER BY j.dead_letter_reason, j.completed_at LIMIT 1)) AS first_seen,
            coalesce((SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND j.dead_letter_reason = p.reason AND j.completed_at IS NOT NULL
                        ORDER BY j.completed_at DESC LIMIT 1),
                     (SELECT j.completed_at FROM backoff.jobs AS j WHERE j.status = 'dead_lettered'
                        AND j.queue = p.queue AND p.reason IS NULL AND j.dead_letter_reason IS NULL AND j.completed_at IS NOT NULL
                        ORDER BY j.dead_letter_reason DESC, j.completed_at DESC LIMIT 1)) AS last_seen
        FROM backoff._dead_letter_pairs(p_queue, p_pairs) AS p
        -- Once per pair: without the fence the count's subquery is copied
        -- into each expression that reads it, and runs twice.
        OFFSET 0
    ) AS c
    ORDER BY c.queue, c.reason;
END
$$;

COMMENT ON FUNCTION backoff.dead_letter_reasons(text, integer, integer) IS
'The dead letters of queue p_queue (NULL: every queue) counted per queue and reason (NULL: dead-lettered without one, by hand), by queue and reason: count, exact up to p_count_limit (default 100000; above it count is p_count_limit and count_exact false), and first_seen and last_seen, when they were dead-lettered (exact whatever the count; NULL when none has a completion time). At most p_pairs pairs (default 500), the first in (queue, reason) order: ask for one more than shown to learn whether there are more. Index reads only: its cost grows with the pairs and the counts up to their limit, not with the dead letters beyond. Admin only.
Errors: 22023 for a p_count_limit or p_pairs below 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT status FROM backoff.fail(1, 1, ''SMTP 550: mailbox unknown'', p_retryable => false);
SELECT queue, reason, count, count_exact FROM backoff.dead_letter_reasons();';

-- backoff.dead_letter_sample(queue, sample, groups, pairs): the most recent
-- dead letters grouped by error signature, the second half of the web
-- UI's dead-letters summary (docs/adr/0055). The sample is the ids of the
-- most recent p_sample dead letters over every (queue, reason) pair
-- (backoff._dead_letter_pairs): one backward index-only scan of
-- jobs_dead_letters_idx per pair, merged by completed_at (the planner's
-- Merge Append reads about p_sample entries in all, not p_sample per
-- pair). The statement has one branch per pair, so it is written for the
-- pairs and run with EXECUTE. Then the sample's rows (one primary-key
-- probe each: the LIMIT keeps the planner from hashing the whole table for
-- them) are grouped by signature, each group with its newest job's error.
-- A dead letter is in the finished segment but for a moment (until
-- backoff.rotate moves one that finished in a live segment), so each row
-- is looked for there first and in the live segments only if it is not
-- there: one probe of one index per row instead of one in each of the
-- four segments, which at 10,000 rows was the statement's largest cost.
-- No JIT (docs/adr/0053). Admin only.
CREATE OR REPLACE FUNCTION backoff.dead_letter_sample(
    p_queue  text DEFAULT NULL,
    p_sample integer DEFAULT 10000,
    p_groups integer DEFAULT 200,
    p_pairs  integer DEFAULT 500
)
RETURNS TABLE (
    queue      text,
    reason     text,
    signature  text,
    count      bigint,
    first_seen timestamptz,
    last_seen  timestamptz,
    example    text,
    sampled    bigint
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_queues  text[];
    v_reasons text[];
    v_parts   text[] := '{}';
    v_i       integer;
BEGIN
    IF p_sample IS NULL OR p_sample < 1 OR p_groups IS NULL OR p_groups < 1 OR p_pairs IS NULL OR p_pairs < 1 THEN
        RAISE EXCEPTION 'dead letter sample: sample, groups and pairs must be at least 1, got "%", "%" and "%"',
            coalesce(p_sample::text, 'NULL'), coalesce(p_groups::text, 'NULL'), coalesce(p_pairs::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT pg_catalog.array_agg(d.queue ORDER BY d.queue, d.reason), pg_catalog.array_agg(d.reason ORDER BY d.queue, d.reason)
    INTO v_queues, v_reasons
    FROM backoff._dead_letter_pairs(p_queue, p_pairs) AS d;
    IF v_queues IS NULL THEN
        RETURN;
    END IF;
    -- $1: the sample's size, $2: the groups, $3 and $4: the pairs' queues
    -- and reasons, indexed by the branch.
    FOR v_i IN 1 .. pg_catalog.cardinality(v_queues) LOOP
        IF v_reasons[v_i] IS NULL THEN
            -- The queue's NULL reasons come first in the index read
            -- backward: take the queue's first $1 entries and keep the NULL
            -- ones (a WHERE ... IS NULL lets the planner guess that most dead
            -- letters have no reason and sort them all). Merge Append then
            -- sorts this part by completed_at.
            v_parts := v_parts || pg_catalog.format(
                '(SELECT n.completed_at, n.id FROM (SELECT j.completed_at, j.id, j.dead_letter_reason'
                ' FROM backoff.jobs AS j WHERE j.status = ''dead_lettered'' AND j.queue = $3[%s]'
                ' ORDER BY j.dead_letter_reason DESC, j.completed_at DESC, j.id DESC LIMIT $1) AS n'
                ' WHERE n.dead_letter_reason IS NULL)', v_i);
        ELSE
            v_parts := v_parts || pg_catalog.format(
                '(SELECT j.completed_at, j.id FROM backoff.jobs AS j WHERE j.status = ''dead_lettered'''
                ' AND j.queue = $3[%s] AND j.dead_letter_reason = $4[%s]'
                ' ORDER BY j.completed_at DESC, j.id DESC LIMIT $1)', v_i, v_i);
        END IF;
    END LOOP;
    RETURN QUERY EXECUTE 'WITH sample AS MATERIALIZED (SELECT u.completed_at, u.id FROM ('
        || pg_catalog.array_to_string(v_parts, ' UNION ALL ')
        || ') AS u ORDER BY u.completed_at DESC, u.id DESC LIMIT $1),
groups AS (
    SELECT j.queue, j.dead_letter_reason AS reason, backoff._error_signature(j.last_error) AS sig, pg_catalog.count(*) AS n,
        min(coalesce(j.completed_at, j.created_at)) AS first_seen, max(coalesce(j.completed_at, j.created_at)) AS last_seen,
        (pg_catalog.array_agg(j.id ORDER BY s.completed_at DESC, s.id DESC))[1] AS newest
    FROM sample AS s
    CROSS JOIN LATERAL ((SELECT j.id, j.queue, j.dead_letter_reason, j.last_error, j.completed_at, j.created_at
                         FROM backoff.jobs AS j WHERE j.id = s.id AND j.segment = 0)
                        UNION ALL
                        (SELECT j.id, j.queue, j.dead_letter_reason, j.last_error, j.completed_at, j.created_at
                         FROM backoff.jobs AS j WHERE j.id = s.id AND j.segment <> 0)
                        LIMIT 1) AS j
    GROUP BY 1, 2, 3
    ORDER BY 4 DESC, 1, 2, 3
    LIMIT $2
)
SELECT g.queue, coalesce(g.reason, ''''), g.sig, g.n, g.first_seen, g.last_seen, coalesce(e.last_error, ''''),
    (SELECT pg_catalog.count(*) FROM sample)
FROM groups AS g LEFT JOIN backoff.jobs AS e ON e.id = g.newest
ORDER BY g.n DESC, g.queue, g.reason, g.sig'
        USING p_sample, p_groups, v_queues, v_reasons;
END
$$;

COMMENT ON FUNCTION backoff.dead_letter_sample(text, integer, integer, integer) IS
'The most recent p_sample dead letters (default 10000, by when they were dead-lettered) of queue p_queue (NULL: every queue) grouped by queue, reason ('''' for none) and signature (backoff.error_signature of last_error), largest group first, at most p_groups groups (default 200): count, first_seen and last_seen within the sample, example (the last error of the group''s newest job, unmasked), and sampled, how many dead letters the sample holds. Only the first p_pairs (queue, reason) pairs (default 500) are sampled, as backoff.dead_letter_reasons counts them: with that function''s counts, the groups are whole when every count is exact and their sum is at most sampled. Reads the index and p_sample rows: its cost does not grow with the dead letters beyond the sample. Admin only.
Errors: 22023 for a p_sample, p_groups or p_pairs below 1.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT status FROM backoff.fail(1, 1, ''SMTP 550: mailbox 1234 unknown'', p_retryable => false);
SELECT queue, reason, signature, count, sampled FROM backoff.dead_letter_sample();';

-- backoff.pause_queue(queue, create, now): stop claims from a queue (claim
-- skips a paused queue; acquire, settling and heartbeats go on, so running
-- jobs finish). A queue without a row in backoff.queues gets one, with the
-- policy backoff._job_policy_name gives it today (so pausing changes no
-- job's policy). A name that is no queue (no row, no job) is refused
-- unless p_create: a typo must not leave a paused phantom queue behind
-- while the real one runs on (docs/adr/0066). A pause that changes the
-- queue is recorded in backoff.queue_events with the login role. Returns
-- true if the queue was running, false if it was already paused. Admin
-- only.
CREATE OR REPLACE FUNCTION backoff.pause_queue(
    p_queue  text,
    p_create boolean DEFAULT false,
    p_now    timestamptz DEFAULT now()
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_was_paused boolean;
BEGIN
    p_queue := backoff._switch_queue_name('pause', p_queue, p_create);
    p_now := backoff._now(p_now);
    SELECT q.paused INTO v_was_paused FROM backoff.queues AS q WHERE q.name = p_queue FOR UPDATE;
    IF NOT FOUND THEN
        IF NOT p_create AND NOT backoff._queue_has_jobs(p_queue) THEN
            RAISE EXCEPTION 'cannot pause queue "%": no such queue (it has no jobs and no configuration)', p_queue
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Check the name, or pass p_create => true to create the queue paused.';
        END IF;
        INSERT INTO backoff.queues (name, policy, paused, updated_at)
        VALUES (p_queue, backoff._job_policy_name(NULL, p_queue), true, pg_catalog.now())
        ON CONFLICT (name) DO UPDATE SET paused = true, updated_at = pg_catalog.now();
    ELSIF v_was_paused THEN
        RETURN false;
    ELSE
        UPDATE backoff.queues AS q SET paused = true, updated_at = pg_catalog.now() WHERE q.name = p_queue;
    END IF;
    INSERT INTO backoff.queue_events (queue, action, role, at) VALUES (p_queue, 'pause', session_user, p_now);
    RETURN true;
END
$$;

COMMENT ON FUNCTION backoff.pause_queue(text, boolean, timestamptz) IS
'Pause p_queue: backoff.claim returns no job of it until backoff.resume_queue. Jobs already running go on (they can still complete, fail, heartbeat and snooze), enqueue still adds jobs, and backoff.acquire of a job by id still works. A queue without a row in backoff.queues gets one with the policy it has now (backoff.job_policy), so pausing changes no job''s policy. A queue that has neither a row in backoff.queues nor any job is refused unless p_create is true (then it is created paused). A pause that changes the queue is recorded in backoff.queue_events (queue, action ''pause'', role = the login role, at = p_now). Returns true if the queue was running, false if it was already paused. Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, a queue that does not exist (without p_create), a NULL p_create, or a bad p_now (p_now NULL is the database clock).
Example:
SELECT backoff.pause_queue(''emails'', p_create => true);
SELECT name, policy, paused FROM backoff.queues;
SELECT queue, action, role FROM backoff.queue_events;';

-- backoff.resume_queue(queue, create, now): undo backoff.pause_queue;
-- claims of the queue start again. Returns true if the queue was paused,
-- false if it was not (a queue without a row is not paused). A name that
-- is no queue (no row, no job) is refused unless p_create, as pause_queue
-- refuses it: "resumed" must not be reported for a typo (docs/adr/0066).
-- A resume that changes the queue is recorded in backoff.queue_events.
-- Admin only.
CREATE OR REPLACE FUNCTION backoff.resume_queue(
    p_queue  text,
    p_create boolean DEFAULT false,
    p_now    timestamptz DEFAULT now()
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_queue := backoff._switch_queue_name('resume', p_queue, p_create);
    p_now := backoff._now(p_now);
    UPDATE backoff.queues AS q SET paused = false, updated_at = pg_catalog.now()
    WHERE q.name = p_queue AND q.paused;
    IF FOUND THEN
        INSERT INTO backoff.queue_events (queue, action, role, at) VALUES (p_queue, 'resume', session_user, p_now);
        RETURN true;
    END IF;
    IF NOT p_create
       AND NOT EXISTS (SELECT FROM backoff.queues AS q WHERE q.name = p_queue)
       AND NOT backoff._queue_has_jobs(p_queue) THEN
        RAISE EXCEPTION 'cannot resume queue "%": no such queue (it has no jobs and no configuration)', p_queue
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Check the name, or pass p_create => true.';
    END IF;
    IF p_create THEN
        -- A known queue that runs, with its policy of today.
        INSERT INTO backoff.queues (name, policy, paused, updated_at)
        VALUES (p_queue, backoff._job_policy_name(NULL, p_queue), false, pg_catalog.now())
        ON CONFLICT (name) DO NOTHING;
    END IF;
    RETURN false;
END
$$;

COMMENT ON FUNCTION backoff.resume_queue(text, boolean, timestamptz) IS
'Resume p_queue after backoff.pause_queue: backoff.claim returns its due jobs again. Returns true if the queue was paused, false if it was not (a queue without a row in backoff.queues is not paused). A queue that has neither a row in backoff.queues nor any job is refused unless p_create is true (then it gets a row, not paused, with the policy it has now). A resume that changes the queue is recorded in backoff.queue_events (queue, action ''resume'', role = the login role, at = p_now). Admin only.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, a queue that does not exist (without p_create), a NULL p_create, or a bad p_now (p_now NULL is the database clock).
Example:
SELECT backoff.pause_queue(''emails'', p_create => true);
SELECT backoff.resume_queue(''emails'');';

-- backoff.grant_queue(role, queue, privilege): allow p_role to act on
-- p_queue with p_privilege ('produce': enqueue; 'work': claim, acquire,
-- complete, complete_many, fail, heartbeat, snooze, reap). p_queue is a
-- queue name or a prefix ending in '*' ('mail.*'; '*' alone is every
-- queue). A role with at least one grant (its own or one of a role it is a
-- member of) may act only on the queues granted to it; a role without
-- grants acts on no queue when backoff.settings.require_queue_grants is on,
-- on every queue when it is off (
-- docs/adr/0038-queue-scoped-privileges.md, docs/adr/0058). The grant is stored with its
-- LIKE pattern, so that the check is one LIKE ANY per call.
CREATE OR REPLACE FUNCTION backoff.grant_queue(
    p_role      text,
    p_queue     text,
    p_privilege text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role    oid;
    v_pattern text;
BEGIN
    v_role := backoff._grant_role('grant_queue', p_role, p_privilege);
    p_queue := backoff._check_name('queue', p_queue);
    -- The prefix of 'mail.*' is 'mail.', matched literally.
    v_pattern := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                     CASE WHEN pg_catalog.right(p_queue, 1) = '*' THEN pg_catalog.left(p_queue, -1) ELSE p_queue END,
                     '\', '\\'), '%', '\%'), '_', '\_')
                 || CASE WHEN pg_catalog.right(p_queue, 1) = '*' THEN '%' ELSE '' END;
    INSERT INTO backoff.queue_grants (role, queue, privilege, pattern)
    VALUES (v_role, p_queue, p_privilege, v_pattern)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.grant_queue(text, text, text) IS
'Allow role p_role (and its members) to act on queue p_queue with p_privilege: ''produce'' (enqueue) or ''work'' (claim, acquire, complete, complete_many, fail, heartbeat, snooze; reap settles only the granted queues'' expired leases). p_queue is a queue name or a prefix ending in * (''mail.*''; ''*'' alone is every queue). A role that has at least one grant, directly or through a role it belongs to, may act only on its granted queues: anything else is refused with 42501 naming the queue, and it reads only the jobs of its ''work'' queues from backoff.jobs. A worker or producer without grants acts on no queue when backoff.settings.require_queue_grants is on (new installs), on every queue when it is off. By id, a job of a queue the caller may not work on is answered as a missing one (BK001). The scope follows the login (session_user): SET ROLE cannot widen it; a connection whose login has no grants takes the scope of the role it SET ROLEs to. Superusers are never scoped. Returns true when the grant is new, false when it existed. Admin only.
Errors: 22023 for an unknown role, a privilege other than produce or work, a queue that is not 1 to 128 bytes without control or format characters.
Example:
SELECT backoff.grant_queue(''backoff_worker'', ''mail.*'', ''work'');
SELECT role::regrole, queue, privilege FROM backoff.queue_grants ORDER BY 1, 2, 3;';

-- backoff.revoke_queue(role, queue, privilege): remove one grant of
-- backoff.grant_queue, exactly as it was written (a prefix grant is revoked
-- by the same 'mail.*', not queue by queue). Revoking a role's last grant
-- leaves it without grants: it then acts on no queue with
-- require_queue_grants on, on every queue with it off
-- (docs/adr/0038-queue-scoped-privileges.md, docs/adr/0058).
CREATE OR REPLACE FUNCTION backoff.revoke_queue(
    p_role      text,
    p_queue     text,
    p_privilege text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role oid;
BEGIN
    v_role := backoff._grant_role('revoke_queue', p_role, p_privilege);
    DELETE FROM backoff.queue_grants AS g
    WHERE g.role = v_role AND g.queue = p_queue AND g.privilege = p_privilege;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.revoke_queue(text, text, text) IS
'Remove the grant (p_role, p_queue, p_privilege) written by backoff.grant_queue, spelled as it was granted (a prefix grant ''mail.*'' is revoked as ''mail.*''). Returns true when a grant was removed, false when there was none. Revoking a role''s last grant leaves it as a role that was never granted one: it may then act on no queue when backoff.settings.require_queue_grants is on, on every queue when it is off. Admin only.
Errors: 22023 for an unknown role, a privilege other than produce or work.
Example:
SELECT backoff.grant_queue(''backoff_worker'', ''mail.*'', ''work'');
SELECT backoff.revoke_queue(''backoff_worker'', ''mail.*'', ''work'');';

-- backoff._cron_field(expression, field, name, min, max): the values of one
-- field of a cron expression, sorted and distinct, or 22023 naming the
-- expression, the field and its allowed range (docs/adr/0063). A field is a
-- comma-separated list of items, each *, */n, a, a-b or a-b/n; month and
-- weekday fields also take three-letter English names (jan, mon), which
-- the caller has already replaced by numbers. Private; called when a
-- schedule is written or previewed, never when one fires.
CREATE OR REPLACE FUNCTION backoff._cron_field(
    p_expression text,
    p_field      text,
    p_name       text,
    p_min        integer,
    p_max        integer
)
RETURNS integer[]
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_item   text;
    v_parts  text[];
    v_lo     integer;
    v_hi     integer;
    v_step   integer;
    v_values integer[] := '{}';
    v_where  text := pg_catalog.format('cron "%s": %s field "%s"', p_expression, p_name, p_field);
BEGIN
    FOREACH v_item IN ARRAY pg_catalog.string_to_array(p_field, ',') LOOP
        IF v_item = '' THEN
            RAISE EXCEPTION '% has an empty list item', v_where
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- item = range [/ step]; range = * | a | a-b
        v_parts := pg_catalog.regexp_match(v_item, '^(\*|([0-9]{1,4})(?:-([0-9]{1,4}))?)(?:/([0-9]{1,4}))?$');
        IF v_parts IS NULL THEN
            RAISE EXCEPTION '% is not *, a number, a range a-b or a step (*/n, a-b/n) of numbers in %-%', v_where, p_min, p_max
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_parts[1] = '*' THEN
            v_lo := p_min;
            v_hi := p_max;
        ELSE
            v_lo := v_parts[2]::integer;
            v_hi := coalesce(v_parts[3]::integer, v_lo);
            IF v_lo < p_min OR v_lo > p_max OR v_hi < p_min OR v_hi > p_max THEN
                RAISE EXCEPTION '% is outside %-%', v_where, p_min, p_max
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF v_hi < v_lo THEN
                RAISE EXCEPTION '% has a range from high to low (%-%)', v_where, v_lo, v_hi
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
        v_step := coalesce(v_parts[4]::integer, 1);
        IF v_parts[4] IS NOT NULL AND (v_step < 1 OR v_step > p_max - p_min + 1) THEN
            RAISE EXCEPTION '% has step %, want 1-%', v_where, v_step, p_max - p_min + 1
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- "a/n" alone (no range) is not cron: "a-b/n" says where it ends.
        IF v_parts[4] IS NOT NULL AND v_parts[1] <> '*' AND v_parts[3] IS NULL THEN
            RAISE EXCEPTION '% has a step without a range (write %-%/%)', v_where, v_lo, p_max, v_step
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_values := v_values || ARRAY(SELECT pg_catalog.generate_series(v_lo, v_hi, v_step));
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT v FROM pg_catalog.unnest(v_values) AS v ORDER BY v);
END
$$;

-- backoff._parse_cron(expression): a 5-field cron expression (minute hour
-- day-of-month month day-of-week) as the sets backoff.schedules stores, or
-- 22023 naming the expression and what is wrong with it
-- (docs/adr/0063). Also accepted: the macros @yearly (@annually),
-- @monthly, @weekly, @daily (@midnight) and @hourly, and three-letter
-- English month and weekday names. Weekday 7 is Sunday, stored as 0.
-- days_or is cron's rule for the two day fields: when both are restricted
-- (neither starts with *), a day matching either one matches.
-- fixed_time: neither the minute nor the hour field starts with *; such a
-- schedule names wall-clock times, which daylight saving may skip or
-- repeat (backoff._wall_instants). Private.
CREATE OR REPLACE FUNCTION backoff._parse_cron(
    p_expression text,
    OUT minutes    integer[],
    OUT hours      integer[],
    OUT days       integer[],
    OUT months     integer[],
    OUT weekdays   integer[],
    OUT days_or    boolean,
    OUT fixed_time boolean
)
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_text   text := pg_catalog.lower(pg_catalog.btrim(coalesce(p_expression, ''), E' \t\n\r'));
    v_fields text[];
    v_names  text[];
BEGIN
    IF p_expression IS NULL OR octet_length(p_expression) > 256 THEN
        RAISE EXCEPTION 'cron "%": want 5 fields of at most 256 bytes in all (minute hour day-of-month month day-of-week)',
            coalesce(pg_catalog.left(p_expression, 64), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_text := CASE v_text
        WHEN '@yearly' THEN '0 0 1 1 *' WHEN '@annually' THEN '0 0 1 1 *'
        WHEN '@monthly' THEN '0 0 1 * *' WHEN '@weekly' THEN '0 0 * * 0'
        WHEN '@daily' THEN '0 0 * * *' WHEN '@midnight' THEN '0 0 * * *'
        WHEN '@hourly' THEN '0 * * * *' ELSE v_text END;
    v_fields := pg_catalog.regexp_split_to_array(v_text, '\s+');
    IF v_text = '' OR pg_catalog.cardinality(v_fields) <> 5 THEN
        RAISE EXCEPTION 'cron "%": want 5 fields (minute hour day-of-month month day-of-week), got %',
            p_expression, CASE WHEN v_text = '' THEN 0 ELSE pg_catalog.cardinality(v_fields) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_names := ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
    FOR v_i IN 1..12 LOOP
        v_fields[4] := pg_catalog.regexp_replace(v_fields[4], '\m' || v_names[v_i] || '\M', v_i::text, 'g');
    END LOOP;
    v_names := ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
    FOR v_i IN 1..7 LOOP
        v_fields[5] := pg_catalog.regexp_replace(v_fields[5], '\m' || v_names[v_i] || '\M', (v_i - 1)::text, 'g');
    END LOOP;
    minutes  := backoff._cron_field(p_expression, v_fields[1], 'minute', 0, 59);
    hours    := backoff._cron_field(p_expression, v_fields[2], 'hour', 0, 23);
    days     := backoff._cron_field(p_expression, v_fields[3], 'day-of-month', 1, 31);
    months   := backoff._cron_field(p_expression, v_fields[4], 'month', 1, 12);
    weekdays := backoff._cron_field(p_expression, v_fields[5], 'day-of-week', 0, 7);
    weekdays := ARRAY(SELECT DISTINCT w % 7 FROM pg_catalog.unnest(weekdays) AS w ORDER BY 1);
    days_or := pg_catalog.left(v_fields[3], 1) <> '*' AND pg_catalog.left(v_fields[5], 1) <> '*';
    fixed_time := pg_catalog.left(v_fields[1], 1) <> '*' AND pg_catalog.left(v_fields[2], 1) <> '*';
END
$$;

-- backoff._cron_next_wall(sets..., after): the first wall-clock time
-- (minute resolution) strictly after p_after that the parsed cron sets
-- match, or NULL when none does within 8 years (a leap day on a given
-- weekday repeats within that; "0 0 30 2 *" never does). Wall-clock means
-- local time without a zone: backoff._next_fire maps it to instants.
-- The cost is in days searched, not minutes: a month outside the set is
-- skipped whole, a day that does not match costs two look-ups, and the
-- first matching day returns at its first matching minute. Private.
CREATE OR REPLACE FUNCTION backoff._cron_next_wall(
    p_minutes  integer[],
    p_hours    integer[],
    p_days     integer[],
    p_months   integer[],
    p_weekdays integer[],
    p_days_or  boolean,
    p_after    timestamp
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_start timestamp := pg_catalog.date_trunc('minute', p_after) + interval '1 minute';
    v_day   date := v_start::date;
    v_end   date := v_start::date + 2923;
    -- The first minute of the day that may match (only the first day
    -- starts after midnight).
    v_from  integer := (extract(hour FROM v_start) * 60 + extract(minute FROM v_start))::integer;
    v_dom   boolean;
    v_dow   boolean;
    v_h     integer;
    v_m     integer;
BEGIN
    WHILE v_day < v_end LOOP
        IF NOT (extract(month FROM v_day)::integer = ANY (p_months)) THEN
            v_day := (pg_catalog.date_trunc('month', v_day) + interval '1 month')::date;
            v_from := 0;
            CONTINUE;
        END IF;
        v_dom := extract(day FROM v_day)::integer = ANY (p_days);
        v_dow := extract(dow FROM v_day)::integer = ANY (p_weekdays);
        IF (CASE WHEN p_days_or THEN v_dom OR v_dow ELSE v_dom AND v_dow END) THEN
            FOREACH v_h IN ARRAY p_hours LOOP
                CONTINUE WHEN v_h * 60 + 59 < v_from;
                FOREACH v_m IN ARRAY p_minutes LOOP
                    IF v_h * 60 + v_m >= v_from THEN
                        RETURN v_day + pg_catalog.make_time(v_h, v_m, 0);
                    END IF;
                END LOOP;
            END LOOP;
        END IF;
        v_day := v_day + 1;
        v_from := 0;
    END LOOP;
    RETURN NULL;
END
$$;

-- backoff._utc_offset(instant, zone): the zone's UTC offset at p_at.
-- Private.
CREATE OR REPLACE FUNCTION backoff._utc_offset(p_at timestamptz, p_zone text)
RETURNS interval
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT (p_at AT TIME ZONE p_zone) - (p_at AT TIME ZONE 'UTC')
$$;

-- backoff._wall_instants(wall, zone, fixed_time): the instants at which a
-- cron schedule fires for the wall-clock time p_wall in p_zone, in order
-- (docs/adr/0063, as cron does):
--   a wall time that occurs once -> that instant;
--   one that occurs twice (a fall-back hour) -> the first occurrence for a
--     fixed-time schedule, both for one whose minute or hour field is a
--     wildcard (it runs by elapsed time, at least hourly);
--   one that does not occur (a spring-forward gap) -> the first instant
--     after the gap for a fixed-time schedule, none for a wildcard one
--     (its next slot after the gap comes on time).
-- The occurrences are found from three mappings of p_wall: PostgreSQL's
-- own, and those made from 3 hours before and after (outside any shift of
-- at most 3 hours, so each takes one side's offset); a mapping counts when
-- it maps back to p_wall. In a gap none does, and the end of the gap is
-- found by bisection to the second between the two sides' mappings.
-- Private; called only near an offset change (backoff._next_fire).
CREATE OR REPLACE FUNCTION backoff._wall_instants(p_wall timestamp, p_zone text, p_fixed_time boolean)
RETURNS timestamptz[]
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    v_found timestamptz[];
    v_lo    double precision;
    v_hi    double precision;
    v_mid   double precision;
BEGIN
    v_found := ARRAY(
        SELECT DISTINCT c
        FROM pg_catalog.unnest(ARRAY[p_wall AT TIME ZONE p_zone,
                                     ((p_wall - interval '3 hours') AT TIME ZONE p_zone) + interval '3 hours',
                                     ((p_wall + interval '3 hours') AT TIME ZONE p_zone) - interval '3 hours']) AS c
        WHERE (c AT TIME ZONE p_zone) = p_wall
        ORDER BY c);
    IF pg_catalog.cardinality(v_found) > 0 THEN
        RETURN CASE WHEN p_fixed_time THEN v_found[1:1] ELSE v_found END;
    END IF;
    IF NOT p_fixed_time THEN
        RETURN '{}';
    END IF;
    -- In the gap: the local time before it is earlier than p_wall, after
    -- it later. Find the first second whose local time is past p_wall.
    v_lo := extract(epoch FROM ((p_wall + interval '3 hours') AT TIME ZONE p_zone) - interval '3 hours');
    v_hi := extract(epoch FROM ((p_wall - interval '3 hours') AT TIME ZONE p_zone) + interval '3 hours');
    IF v_lo > v_hi THEN
        v_mid := v_lo; v_lo := v_hi; v_hi := v_mid;
    END IF;
    WHILE v_hi - v_lo > 1 LOOP
        v_mid := pg_catalog.floor((v_lo + v_hi) / 2);
        IF (pg_catalog.to_timestamp(v_mid) AT TIME ZONE p_zone) > p_wall THEN
            v_hi := v_mid;
        ELSE
            v_lo := v_mid;
        END IF;
    END LOOP;
    RETURN ARRAY[pg_catalog.to_timestamp(v_hi)];
END
$$;

-- backoff._next_fire(schedule, after): the schedule's first slot strictly
-- after p_after, or NULL when it has none before year 10000
-- (docs/adr/0063). Private; the one answer to "when next", for
-- put_schedule, resume_schedule, fire_schedules and schedule_fires.
--
-- A fixed interval is arithmetic: slots are anchor + k * every for every
-- integer k, counted in microseconds.
-- A cron schedule: the next matching wall-clock time after p_after's local
-- time, mapped to its instant in the schedule's zone. That is exact when
-- the zone's offset does not change within 3 hours of p_after nor of the
-- answer (the fast path: every slot but those next to a daylight-saving
-- change). Otherwise the matching wall times around are walked in order
-- and each mapped by backoff._wall_instants, which applies the daylight
-- saving rules; the earliest instant after p_after wins.
CREATE OR REPLACE FUNCTION backoff._next_fire(p_schedule backoff.schedules, p_after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_zone   text := p_schedule.time_zone;
    v_every  bigint;
    v_since  numeric;
    v_next   timestamptz;
    v_local  timestamp;
    v_wall   timestamp;
    v_best   timestamptz;
    v_at     timestamptz;
    v_steady boolean;
BEGIN
    IF p_after IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_schedule.every IS NOT NULL THEN
        v_every := backoff._interval_us(p_schedule.every);
        v_since := extract(epoch FROM p_after - p_schedule.anchor) * 1000000;
        v_next := p_schedule.anchor
                  + ((pg_catalog.floor(v_since / v_every) + 1) * v_every)::bigint * interval '1 microsecond';
        RETURN CASE WHEN v_next < '10000-01-01 00:00:00+00'::timestamptz THEN v_next END;
    END IF;

    v_local := p_after AT TIME ZONE v_zone;
    v_steady := backoff._utc_offset(p_after - interval '3 hours', v_zone)
                = backoff._utc_offset(p_after + interval '3 hours', v_zone);
    IF v_steady THEN
        v_wall := backoff._cron_next_wall(p_schedule.minutes, p_schedule.hours, p_schedule.days,
                                          p_schedule.months, p_schedule.weekdays, p_schedule.days_or, v_local);
        IF v_wall IS NULL THEN
            RETURN NULL;
        END IF;
        v_next := v_wall AT TIME ZONE v_zone;
        IF backoff._utc_offset(v_next - interval '3 hours', v_zone)
           = backoff._utc_offset(v_next + interval '3 hours', v_zone) THEN
            RETURN CASE WHEN v_next < '10000-01-01 00:00:00+00'::timestamptz THEN v_next END;
        END IF;
        -- The answer is next to an offset change: walk from its wall time.
        v_wall := v_wall - interval '1 minute';
    ELSE
        -- p_after is next to an offset change: a wall time up to 3 hours
        -- before its local time may still occur after it (a repeated hour)
        -- or map past it (the end of a gap).
        v_wall := v_local - interval '3 hours';
    END IF;
    LOOP
        v_wall := backoff._cron_next_wall(p_schedule.minutes, p_schedule.hours, p_schedule.days,
                                          p_schedule.months, p_schedule.weekdays, p_schedule.days_or, v_wall);
        EXIT WHEN v_wall IS NULL;
        -- No later wall time maps before v_best: past 3 hours of local
        -- time after it, or when the offset is steady around it.
        EXIT WHEN v_best IS NOT NULL
                  AND (v_wall > (v_best AT TIME ZONE v_zone) + interval '3 hours'
                       OR backoff._utc_offset(v_best - interval '3 hours', v_zone)
                          = backoff._utc_offset(v_best + interval '3 hours', v_zone));
        FOREACH v_at IN ARRAY backoff._wall_instants(v_wall, v_zone, p_schedule.fixed_time) LOOP
            IF v_at > p_after AND (v_best IS NULL OR v_at < v_best) THEN
                v_best := v_at;
            END IF;
        END LOOP;
    END LOOP;
    RETURN CASE WHEN v_best < '10000-01-01 00:00:00+00'::timestamptz THEN v_best END;
END
$$;

-- backoff._latest_fire(schedule, first, now): the schedule's latest slot at
-- or before p_now, given p_first, a slot at or before p_now (its next fire
-- time). What catch-up 'latest' fires after downtime (docs/adr/0063).
-- Private.
--
-- However many slots were missed, the cost stays small: a fixed interval
-- is arithmetic; for cron, a window ending at p_now doubles from one
-- minute until it holds a slot (or reaches p_first), then the slots in it
-- are walked forward. A window that doubled holds at most the slots of
-- twice the gap before p_now's latest slot, so an every-minute schedule
-- down for a year walks a few minutes, not half a million slots.
CREATE OR REPLACE FUNCTION backoff._latest_fire(p_schedule backoff.schedules, p_first timestamptz, p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_every bigint;
    v_span  interval := interval '1 minute';
    v_slot  timestamptz;
    v_next  timestamptz;
BEGIN
    IF p_schedule.every IS NOT NULL THEN
        v_every := backoff._interval_us(p_schedule.every);
        RETURN greatest(p_first, p_schedule.anchor
            + (pg_catalog.floor(extract(epoch FROM p_now - p_schedule.anchor) * 1000000 / v_every) * v_every)::bigint
              * interval '1 microsecond');
    END IF;
    LOOP
        IF p_now - v_span <= p_first THEN
            v_slot := p_first;
            EXIT;
        END IF;
        v_slot := backoff._next_fire(p_schedule, p_now - v_span);
        EXIT WHEN v_slot <= p_now;
        v_span := v_span * 2;
    END LOOP;
    LOOP
        v_next := backoff._next_fire(p_schedule, v_slot);
        EXIT WHEN v_next IS NULL OR v_next > p_now;
        v_slot := v_next;
    END LOOP;
    RETURN v_slot;
END
$$;

-- backoff._count_fires(schedule, from, to): how many slots the schedule
-- has at or after p_from and before p_to: what fire_schedules adds to a
-- schedule's missed counter when it passes those slots over
-- (docs/adr/0076). Private.
--
-- Exact, at a cost that stays small however long the outage: a fixed
-- interval is arithmetic. A cron schedule is walked slot by slot
-- (backoff._next_fire) over the partial local day at each end; the local
-- days in between are counted from the parsed sets, each matching day
-- holding every hour times every minute of the sets, when the zone's
-- offset is the same from 3 hours before the day to 3 hours after it (then
-- each of its wall times is exactly one slot of that day, as in
-- _next_fire's fast path); a day next to an offset change is walked. A
-- year of an every-minute schedule counts 365 days and walks a few.
CREATE OR REPLACE FUNCTION backoff._count_fires(p_schedule backoff.schedules, p_from timestamptz, p_to timestamptz)
RETURNS bigint
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_zone  text := p_schedule.time_zone;
    v_every numeric;
    v_n     bigint := 0;
    v_at    timestamptz;
    v_first date;
    v_last  date;
    v_day   date;
    v_start timestamptz;
    v_end   timestamptz;
    v_per   bigint;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_to <= p_from THEN
        RETURN 0;
    END IF;
    IF p_schedule.every IS NOT NULL THEN
        -- k with p_from <= anchor + k * every < p_to.
        v_every := backoff._interval_us(p_schedule.every);
        RETURN (pg_catalog.ceil(extract(epoch FROM p_to - p_schedule.anchor) * 1000000 / v_every)
                - pg_catalog.ceil(extract(epoch FROM p_from - p_schedule.anchor) * 1000000 / v_every))::bigint;
    END IF;
    -- Whole local days from v_first to v_last are counted; the rest walked.
    v_first := (p_from AT TIME ZONE v_zone)::date + 1;
    v_last := (p_to AT TIME ZONE v_zone)::date - 1;
    IF v_last < v_first THEN
        v_first := NULL;
        v_start := p_to;
    ELSE
        v_start := v_first::timestamp AT TIME ZONE v_zone;
        v_end := (v_last + 1)::timestamp AT TIME ZONE v_zone;
    END IF;
    -- The slots before the counted days (or all of them).
    v_at := backoff._next_fire(p_schedule, p_from - interval '1 microsecond');
    WHILE v_at < v_start LOOP
        v_n := v_n + 1;
        v_at := backoff._next_fire(p_schedule, v_at);
    END LOOP;
    IF v_first IS NULL THEN
        RETURN v_n;
    END IF;
    v_per := pg_catalog.cardinality(p_schedule.hours)::bigint * pg_catalog.cardinality(p_schedule.minutes);
    FOR v_day IN SELECT d::date FROM pg_catalog.generate_series(v_first, v_last, interval '1 day') AS d LOOP
        v_start := v_day::timestamp AT TIME ZONE v_zone;
        v_end := (v_day + 1)::timestamp AT TIME ZONE v_zone;
        IF backoff._utc_offset(v_start - interval '3 hours', v_zone) = backoff._utc_offset(v_end + interval '3 hours', v_zone) THEN
            IF extract(month FROM v_day)::integer = ANY (p_schedule.months)
               AND (CASE WHEN p_schedule.days_or
                         THEN extract(day FROM v_day)::integer = ANY (p_schedule.days)
                              OR extract(dow FROM v_day)::integer = ANY (p_schedule.weekdays)
                         ELSE extract(day FROM v_day)::integer = ANY (p_schedule.days)
                              AND extract(dow FROM v_day)::integer = ANY (p_schedule.weekdays) END) THEN
                v_n := v_n + v_per;
            END IF;
        ELSE
            v_at := backoff._next_fire(p_schedule, v_start - interval '1 microsecond');
            WHILE v_at < v_end LOOP
                v_n := v_n + 1;
                v_at := backoff._next_fire(p_schedule, v_at);
            END LOOP;
        END IF;
    END LOOP;
    -- The slots after them.
    v_at := backoff._next_fire(p_schedule, v_end - interval '1 microsecond');
    WHILE v_at < p_to LOOP
        v_n := v_n + 1;
        v_at := backoff._next_fire(p_schedule, v_at);
    END LOOP;
    RETURN v_n;
END
$$;

-- backoff._is_zone_name(name): whether name is a time zone of the IANA
-- database that PostgreSQL has, such as 'UTC', 'Europe/Berlin' or
-- 'EST5EDT'. Not by reading pg_timezone_names: that view walks the whole
-- zone directory and fails on any broken link in it (a dangling
-- 'localtime' link is common), so the check would break a server for
-- something unrelated. Instead the name is set as the transaction's
-- TimeZone, which takes zone files and POSIX strings but refuses
-- abbreviations ('CEST') and unknown names ('Mars/Olympus'), and POSIX
-- strings are refused by their shape: an offset written in digits
-- ('UTC+3', 'EST5'), which no zone file name has but the four legacy US
-- zones and Etc/GMT±N, of which only the offsets the database has
-- (Etc/GMT-14 to Etc/GMT+12) pass: PostgreSQL reads any other as a POSIX
-- string. The zone files that name no place are refused by name:
-- posixrules (the template for POSIX strings), localtime (whatever the
-- host's zone is) and Factory (no time zone at all). Private
-- (docs/adr/0063).
CREATE OR REPLACE FUNCTION backoff._is_zone_name(p_name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_saved text := pg_catalog.current_setting('timezone');
BEGIN
    IF p_name !~ '^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$'
       OR (p_name ~ '^[A-Za-z]+[+-]?[0-9]' AND p_name NOT IN ('EST5EDT', 'CST6CDT', 'MST7MDT', 'PST8PDT'))
       OR (p_name ~ '[+-][0-9]' AND p_name !~ '^Etc/GMT(-([0-9]|1[0-4])|[+]([0-9]|1[0-2]))$')
       OR pg_catalog.lower(p_name) IN ('posixrules', 'localtime', 'factory') THEN
        RETURN false;
    END IF;
    BEGIN
        PERFORM pg_catalog.set_config('timezone', p_name, true);
    EXCEPTION WHEN invalid_parameter_value THEN
        RETURN false;
    END;
    PERFORM pg_catalog.set_config('timezone', v_saved, true);
    RETURN true;
END
$$;

-- backoff._schedule_timing(cron, every, time_zone, anchor): a
-- backoff.schedules row with only its timing filled in (cron and its
-- parsed sets, or every and anchor; the time zone), checked; 22023 naming
-- the value otherwise (docs/adr/0063). Exactly one of p_cron and p_every.
-- The time zone must be a name of the IANA database as PostgreSQL knows it
-- (backoff._is_zone_name): a POSIX string such as 'UTC+3' (three hours WEST
-- of Greenwich) or an abbreviation such as 'CEST' (no daylight saving
-- rules) is refused. p_anchor NULL is 1970-01-01 00:00 UTC, so that an interval
-- that divides a day fires on round times ('1 hour' on the hour). Private;
-- put_schedule and schedule_fires share it, so a preview is the schedule.
CREATE OR REPLACE FUNCTION backoff._schedule_timing(
    p_cron      text,
    p_every     interval,
    p_time_zone text,
    p_anchor    timestamptz
)
RETURNS backoff.schedules
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_s backoff.schedules;
BEGIN
    IF (p_cron IS NULL) = (p_every IS NULL) THEN
        RAISE EXCEPTION 'a schedule needs exactly one of a cron expression and an interval, got cron "%" and interval "%"',
            coalesce(p_cron, 'NULL'), coalesce(p_every::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_time_zone IS NULL OR octet_length(p_time_zone) > 64
       OR NOT backoff._is_zone_name(p_time_zone) THEN
        RAISE EXCEPTION 'time zone "%" is not a name of the IANA time zone database (such as UTC or Europe/Berlin)',
            coalesce(pg_catalog.left(p_time_zone, 64), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_s.time_zone := p_time_zone;
    IF p_every IS NOT NULL THEN
        IF extract(month FROM p_every) <> 0 OR extract(year FROM p_every) <> 0
           OR p_every < interval '1 second' OR p_every > interval '876600 hours' THEN
            RAISE EXCEPTION 'interval "%" must be 1 second to 876600 hours, in days, hours, minutes and seconds (a month has no fixed length)', p_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT (p_anchor >= '0001-01-01 00:00:00+00'::timestamptz AND p_anchor < '10000-01-01 00:00:00+00'::timestamptz) THEN
            RAISE EXCEPTION 'anchor must be a finite time in years 1 to 9999, got "%"', p_anchor
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- A day counts as 24 hours: an interval schedule runs by elapsed
        -- time, whatever the zone's clock does.
        v_s.every := p_every;
        v_s.anchor := coalesce(p_anchor, '1970-01-01 00:00:00+00'::timestamptz);
        RETURN v_s;
    END IF;
    IF p_anchor IS NOT NULL THEN
        RAISE EXCEPTION 'an anchor applies to an interval schedule, not to cron "%"', p_cron
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_s.cron := p_cron;
    SELECT c.minutes, c.hours, c.days, c.months, c.weekdays, c.days_or, c.fixed_time
    INTO v_s.minutes, v_s.hours, v_s.days, v_s.months, v_s.weekdays, v_s.days_or, v_s.fixed_time
    FROM backoff._parse_cron(p_cron) AS c;
    RETURN v_s;
END
$$;

-- backoff.put_schedule(name, queue, cron | every, ...): create the periodic
-- job p_name or replace its settings (docs/adr/0063). The cron expression
-- is parsed here, once; fire_schedules reads the stored sets. A changed
-- timing (expression, interval, anchor or zone) restarts the schedule from
-- the first slot after p_now; otherwise its next fire time, its paused
-- switch and its counters are kept, so a configuration applied again
-- changes nothing. A schedule keeps its queue: the queue decides where
-- (on which shard) it lives and fires. Admin only.
CREATE OR REPLACE FUNCTION backoff.put_schedule(
    p_name            text,
    p_queue           text,
    p_cron            text DEFAULT NULL,
    p_every           interval DEFAULT NULL,
    p_time_zone       text DEFAULT 'UTC',
    p_payload         jsonb DEFAULT '{}',
    p_policy          text DEFAULT NULL,
    p_priority        integer DEFAULT 0,
    p_max_attempts    integer DEFAULT NULL,
    p_catch_up        text DEFAULT 'latest',
    p_catch_up_window interval DEFAULT NULL,
    p_catch_up_limit  integer DEFAULT 100,
    p_skip_if_running boolean DEFAULT false,
    p_anchor          timestamptz DEFAULT NULL,
    p_now             timestamptz DEFAULT now()
)
RETURNS backoff.schedules
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_t   backoff.schedules;
    v_old backoff.schedules;
    v_row backoff.schedules;
BEGIN
    p_now := backoff._now(p_now);
    p_name := backoff._check_name('schedule', p_name);
    p_queue := backoff._check_name('queue', p_queue);
    IF p_policy IS NOT NULL THEN
        p_policy := backoff._check_name('policy', p_policy);
        IF NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = p_policy) THEN
            RAISE EXCEPTION 'unknown policy "%"', p_policy
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- The job a slot enqueues must be one enqueue would take (docs/adr/0059).
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got "%"', p_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM backoff._check_payload(ARRAY[coalesce(p_payload, '{}')]);
    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catch_up IS NULL OR p_catch_up NOT IN ('latest', 'all') THEN
        RAISE EXCEPTION 'catch_up must be "latest" or "all", got "%"', coalesce(p_catch_up, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catch_up_window <= interval '0' OR p_catch_up_window > interval '876600 hours' THEN
        RAISE EXCEPTION 'catch_up_window must be NULL or more than 0 and at most 876600 hours, got "%"', p_catch_up_window
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catch_up_limit IS NULL OR p_catch_up_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'catch_up_limit must be between 1 and 10000, got "%"', coalesce(p_catch_up_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_t := backoff._schedule_timing(p_cron, p_every, p_time_zone, p_anchor);

    SELECT * INTO v_old FROM backoff.schedules AS s WHERE s.name = p_name FOR UPDATE;
    IF FOUND AND v_old.queue <> p_queue THEN
        RAISE EXCEPTION 'schedule "%" enqueues into queue "%", not "%": drop it and put it again to move it',
            p_name, v_old.queue, p_queue
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF FOUND AND v_old.cron IS NOT DISTINCT FROM v_t.cron AND v_old.every IS NOT DISTINCT FROM v_t.every
       AND v_old.anchor IS NOT DISTINCT FROM v_t.anchor AND v_old.time_zone = v_t.time_zone THEN
        v_t.next_fire_at := v_old.next_fire_at;
    ELSE
        v_t.next_fire_at := backoff._next_fire(v_t, p_now);
        IF v_t.next_fire_at IS NULL THEN
            RAISE EXCEPTION 'schedule "%": % never fires after "%"', p_name,
                coalesce('cron "' || p_cron || '"', 'interval "' || p_every || '"'), p_now
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    INSERT INTO backoff.schedules AS s (
        name, queue, payload, cron, every, anchor, time_zone,
        minutes, hours, days, months, weekdays, days_or, fixed_time,
        policy, priority, max_attempts, catch_up, catch_up_window, catch_up_limit, skip_if_running,
        next_fire_at, created_at, updated_at)
    VALUES (
        p_name, p_queue, coalesce(p_payload, '{}'), v_t.cron, v_t.every, v_t.anchor, v_t.time_zone,
        v_t.minutes, v_t.hours, v_t.days, v_t.months, v_t.weekdays, v_t.days_or, v_t.fixed_time,
        p_policy, coalesce(p_priority, 0), p_max_attempts, p_catch_up, p_catch_up_window, p_catch_up_limit,
        coalesce(p_skip_if_running, false),
        v_t.next_fire_at, p_now, p_now)
    ON CONFLICT (name) DO UPDATE SET
        payload = excluded.payload, cron = excluded.cron, every = excluded.every, anchor = excluded.anchor,
        time_zone = excluded.time_zone, minutes = excluded.minutes, hours = excluded.hours,
        days = excluded.days, months = excluded.months, weekdays = excluded.weekdays,
        days_or = excluded.days_or, fixed_time = excluded.fixed_time, policy = excluded.policy,
        priority = excluded.priority, max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
        catch_up_window = excluded.catch_up_window, catch_up_limit = excluded.catch_up_limit,
        skip_if_running = excluded.skip_if_running, next_fire_at = excluded.next_fire_at,
        updated_at = excluded.updated_at
    RETURNING * INTO v_row;
    RETURN v_row;
END
$$;

COMMENT ON FUNCTION backoff.put_schedule(text, text, text, interval, text, jsonb, text, integer, integer, text, interval, integer, boolean, timestamptz, timestamptz) IS
'Create the schedule p_name, or replace its settings, and return its row of backoff.schedules. Every slot enqueues one job into p_queue (backoff.fire_schedules) with p_payload, p_policy (NULL: the queue''s), p_priority and p_max_attempts (NULL: the policy''s). Timing, exactly one of: p_cron, a 5-field cron expression (minute hour day-of-month month day-of-week; each field *, */n, a, a-b, a-b/n or a comma list of these; names jan-dec and sun-sat; 7 is Sunday; @hourly, @daily, @weekly, @monthly, @yearly), read in p_time_zone (an IANA name, default UTC; daylight saving as cron: a fixed time skipped by the clock fires once at the end of the gap, one repeated fires once, the first time; a schedule with * in its minute or hour field fires by elapsed time, twice in a repeated hour, never in a gap); or p_every, a fixed interval (1 second to 876600 hours, no months) whose slots are p_anchor + k * p_every (p_anchor NULL: 1970-01-01 00:00 UTC). Missed slots (no caller fired them in time): p_catch_up ''latest'' (default) fires the latest one once and skips the others, ''all'' fires each one, oldest first, at most p_catch_up_limit (default 100) per call; p_catch_up_window (NULL: none) skips those older than now minus the window (''latest'' with a window of a minute fires nothing that is more than a minute late). p_skip_if_running: a slot whose schedule still has a pending, running or retrying job enqueues nothing (counted in skipped, last_skipped_slot). A new schedule, or one whose timing (expression, interval, anchor, zone) changed, fires first at its first slot after p_now; otherwise its next fire time, paused switch and counters are kept. A schedule''s queue cannot change (drop it and put it again). Admin only.
Errors: 22023 for a name, queue or policy that is not 1 to 128 bytes without control or format characters, an unknown policy, a priority outside -32768..32767, a payload larger than backoff.settings.max_payload_bytes, max_attempts < 1, both or neither of p_cron and p_every, a cron expression that is not 5 valid fields (the message names the expression, the field and its allowed range), one that never fires, an interval out of range or with months, a time zone that is not an IANA name, an anchor with a cron expression, a catch_up other than latest or all, a window not above 0, a limit outside 1-10000, another queue for an existing schedule, a p_now outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-28 12:00+00'');
SELECT backoff.put_schedule(''heartbeat'', ''pings'', p_every => ''5 minutes'', p_skip_if_running => true, p_now => ''2026-03-28 12:01+00'');
SELECT name, queue, cron, every, time_zone, next_fire_at FROM backoff.schedules ORDER BY name;';

-- backoff.pause_schedule(name): stop a schedule from firing until
-- backoff.resume_schedule. Returns true when it was running, false when it
-- was already paused or no schedule has that name here (behind a router,
-- every shard is asked and only the one that holds it answers true).
-- Admin only.
CREATE OR REPLACE FUNCTION backoff.pause_schedule(p_name text, p_now timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    p_now := backoff._now(p_now);
    UPDATE backoff.schedules AS s SET paused = true, updated_at = p_now
    WHERE s.name = p_name AND NOT s.paused;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.pause_schedule(text, timestamptz) IS
'Pause the schedule p_name: backoff.fire_schedules fires nothing of it until backoff.resume_schedule, which starts again from the first slot after its own time (the slots in between are not missed, they are skipped). Jobs it already enqueued are not touched. Returns true when the schedule was running, false when it was already paused or no schedule has that name in this database. Admin only.
Errors: 22023 for a p_now outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'');
SELECT backoff.pause_schedule(''nightly-report'');';

-- backoff.resume_schedule(name, now): let a paused schedule fire again,
-- from its first slot after p_now: the slots that passed while it was
-- paused were switched off, not missed, so no catch-up fires them.
-- Returns true when it was paused, false when it was not or no schedule
-- has that name here. Admin only.
CREATE OR REPLACE FUNCTION backoff.resume_schedule(p_name text, p_now timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s backoff.schedules;
BEGIN
    p_now := backoff._now(p_now);
    SELECT * INTO v_s FROM backoff.schedules AS s WHERE s.name = p_name AND s.paused FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE backoff.schedules AS s
    SET paused = false, next_fire_at = backoff._next_fire(v_s, p_now), updated_at = p_now
    WHERE s.name = p_name;
    RETURN true;
END
$$;

COMMENT ON FUNCTION backoff.resume_schedule(text, timestamptz) IS
'Resume the paused schedule p_name: it fires next at its first slot after p_now; the slots that passed while it was paused are not caught up. Returns true when it was paused, false when it was not or no schedule has that name in this database. Admin only.
Errors: 22023 for a p_now outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-01 00:00+00'');
SELECT backoff.pause_schedule(''nightly-report'', ''2026-03-01 00:00+00'');
SELECT backoff.resume_schedule(''nightly-report'', ''2026-03-28 12:00+00'');
SELECT name, paused, next_fire_at FROM backoff.schedules;';

-- backoff.drop_schedule(name): delete a schedule. The jobs it enqueued
-- stay (they name it in backoff.jobs.schedule); a schedule put again under
-- the same name never fires a slot one of them already has. Returns true
-- when it existed here. Admin only.
CREATE OR REPLACE FUNCTION backoff.drop_schedule(p_name text)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM backoff.schedules AS s WHERE s.name = p_name;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.drop_schedule(text) IS
'Delete the schedule p_name; it fires no more. The jobs it enqueued stay, and keep its name and slot in backoff.jobs (schedule, schedule_slot), so a schedule put again under that name never enqueues a slot one of them has. Returns true when it existed in this database, false otherwise. Admin only.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'');
SELECT backoff.drop_schedule(''nightly-report'');';

-- backoff.schedule_fires: the next p_count fire times of a schedule after
-- p_after, each with its wall-clock time in the schedule's zone: of a
-- stored schedule by name, or of an expression or interval not stored yet
-- (what `backoffctl` and the UI preview; docs/adr/0063). Both compute with
-- backoff._next_fire, the function fire_schedules advances with, so the
-- preview is what will fire (catch-up and pauses aside). The second form
-- takes at least four arguments and the first at most three, so that a
-- call with untyped parameters is never ambiguous. By name, a caller
-- scoped by backoff.grant_queue (or without any grant while grants are
-- required) reads only the schedules of the queues it may work on or
-- produce into, those fire_schedules fires for it: another queue's
-- schedule reads as none, its name and times are not told.
CREATE OR REPLACE FUNCTION backoff.schedule_fires(
    p_name  text,
    p_after timestamptz DEFAULT now(),
    p_count integer DEFAULT 10
)
RETURNS TABLE (fire_at timestamptz, wall_time timestamp)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s     backoff.schedules;
    v_scope text[];
BEGIN
    IF p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'count must be between 1 and 1000, got "%"', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The caller's queues, as fire_schedules scopes (NULL: unscoped).
    v_scope := backoff._queue_scope('work') || backoff._queue_scope('produce');
    SELECT * INTO v_s FROM backoff.schedules AS s
    WHERE s.name = p_name AND (v_scope IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_scope));
    IF NOT FOUND THEN
        RETURN;
    END IF;
    fire_at := coalesce(p_after, pg_catalog.now());
    FOR v_i IN 1..p_count LOOP
        fire_at := backoff._next_fire(v_s, fire_at);
        EXIT WHEN fire_at IS NULL;
        wall_time := fire_at AT TIME ZONE v_s.time_zone;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.schedule_fires(text, timestamptz, integer) IS
'The next p_count (1 to 1000, default 10) fire times after p_after (default now) of the stored schedule p_name, each with its wall-clock time in the schedule''s zone; no rows when no schedule has that name in this database, or when it belongs to a queue the caller may neither work on nor produce into (backoff.grant_queue; a caller without any grant while backoff.settings.require_queue_grants is on: every queue). Pauses and catch-up aside, these are the slots backoff.fire_schedules fires.
Errors: 22023 for a count outside 1-1000.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-27 12:00+00'');
SELECT * FROM backoff.schedule_fires(''nightly-report'', ''2026-03-27 12:00+00'', 3);';

CREATE OR REPLACE FUNCTION backoff.schedule_fires(
    p_cron      text,
    p_every     interval,
    p_time_zone text,
    p_anchor    timestamptz,
    p_after     timestamptz DEFAULT now(),
    p_count     integer DEFAULT 10
)
RETURNS TABLE (fire_at timestamptz, wall_time timestamp)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_s backoff.schedules;
BEGIN
    IF p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'count must be between 1 and 1000, got "%"', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_s := backoff._schedule_timing(p_cron, p_every, p_time_zone, p_anchor);
    fire_at := coalesce(p_after, pg_catalog.now());
    FOR v_i IN 1..p_count LOOP
        fire_at := backoff._next_fire(v_s, fire_at);
        EXIT WHEN fire_at IS NULL;
        wall_time := fire_at AT TIME ZONE v_s.time_zone;
        RETURN NEXT;
    END LOOP;
END
$$;

COMMENT ON FUNCTION backoff.schedule_fires(text, interval, text, timestamptz, timestamptz, integer) IS
'The next p_count (1 to 1000, default 10) fire times after p_after (default now) of a schedule that is not stored: exactly one of p_cron (read in p_time_zone) and p_every (from p_anchor; NULL: 1970-01-01 00:00 UTC), as backoff.put_schedule reads them; each with its wall-clock time in p_time_zone. The first four arguments are required (NULL where unused), so that this form is never confused with the one by name. Checks what put_schedule checks, with the same messages, so a configuration can be validated before it is applied.
Errors: 22023 for both or neither of p_cron and p_every, an invalid cron expression (the message names the expression, the field and its allowed range), an interval out of range or with months, a time zone that is not an IANA name, an anchor with a cron expression, a count outside 1-1000.
Example:
SELECT * FROM backoff.schedule_fires(''30 2 * * *'', NULL, ''Europe/Berlin'', NULL, ''2026-03-28 00:00+00'', 3);
SELECT * FROM backoff.schedule_fires(p_cron => NULL, p_every => ''6 hours'', p_time_zone => ''UTC'', p_anchor => ''2026-01-01 03:00+00'', p_after => ''2026-01-01 00:00+00'', p_count => 3);';

-- backoff.upcoming_fires(names, count, now): the fires ahead of several
-- stored schedules in one call, as an operator's list of schedules and a
-- schedule's page show them (docs/adr/0072). Where each schedule's fires
-- start is decided here, so that every client shows the same: a running
-- schedule's at its next fire time or after p_now, whichever is later (a
-- slot before next_fire_at is never fired, and one due before p_now fires
-- at the next call of fire_schedules, not at a time shown as past); a
-- paused one's after p_now, the fires a resume now would bring. Each
-- schedule's times come from backoff.schedule_fires, the computation
-- fire_schedules advances with. Behind a router every shard answers for
-- the schedules it holds. No JIT, as for the other reads (docs/adr/0053).
-- Admin only: it names every schedule, as backoff.schedules does.
CREATE OR REPLACE FUNCTION backoff.upcoming_fires(
    p_names text[] DEFAULT NULL,
    p_count integer DEFAULT 10,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (name text, fire_at timestamptz, wall_time timestamp)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF p_count IS NULL OR p_count NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'upcoming fires: count must be between 1 and 1000, got "%"', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    -- schedule_fires returns the fires after its start: one microsecond
    -- before next_fire_at makes that slot the first.
    RETURN QUERY
    SELECT s.name, f.fire_at, f.wall_time
    FROM backoff.schedules AS s
    CROSS JOIN LATERAL backoff.schedule_fires(s.name,
        CASE WHEN s.paused THEN p_now
             ELSE greatest(p_now, s.next_fire_at - interval '1 microsecond') END,
        p_count) AS f
    WHERE p_names IS NULL OR s.name = ANY (p_names)
    ORDER BY s.name, f.fire_at;
END
$$;

COMMENT ON FUNCTION backoff.upcoming_fires(text[], integer, timestamptz) IS
'The next p_count (1 to 1000, default 10) fires of each stored schedule named in p_names (NULL: every schedule; a name no schedule has gives no rows), by name then time: name, fire_at and wall_time, the wall-clock time in the schedule''s zone. A running schedule''s fires start at its next fire time (next_fire_at) or after p_now, whichever is later: a slot due before p_now fires at the next call of backoff.fire_schedules, whose time is not known. A paused schedule''s start after p_now: the fires a resume at p_now would bring. A schedule whose expression has no later time has no rows. Times as backoff.schedule_fires computes them. Admin only.
Errors: 22023 for a count outside 1-1000 or a bad p_now.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-27 12:00+00'');
SELECT backoff.put_schedule(''hourly-sync'', ''sync'', p_every => ''1 hour'', p_now => ''2026-03-27 12:00+00'');
SELECT backoff.pause_schedule(''hourly-sync'', p_now => ''2026-03-27 12:00+00'');
SELECT * FROM backoff.upcoming_fires(p_count => 2, p_now => ''2026-03-27 12:20+00'');';

-- backoff.schedule_list(name, now): the schedules as an operator lists them
-- (backoffctl schedules list and show, the web UI's Schedules page): each
-- one's settings and counters, whether it is overdue at p_now (its next
-- fire time is past by more than its firing interval, the time from that
-- slot to the one after it: nothing has fired it for a whole interval, so
-- no firer is running for its queue, docs/adr/0076), with the job of its latest slot, found by
-- one backward step of the index of a schedule's slots (manual fires have
-- no slot and are not slots; a pruned job leaves none). A function rather
-- than the client's SELECT, as the other operator reads are
-- (docs/adr/0072): psql and every language read the same, and behind a
-- router each shard answers for the schedules it holds, with its own
-- jobs, instead of a join of views that fetches every shard's whole job
-- table. The optional name is a static filter: planned for its value
-- every call (force_custom_plan). No JIT (docs/adr/0053). Admin only, as
-- backoff.schedules.
CREATE OR REPLACE FUNCTION backoff.schedule_list(p_name text DEFAULT NULL, p_now timestamptz DEFAULT now())
RETURNS TABLE (
    name              text,
    queue             text,
    payload           jsonb,
    cron              text,
    every             interval,
    anchor            timestamptz,
    time_zone         text,
    policy            text,
    priority          integer,
    max_attempts      integer,
    paused            boolean,
    catch_up          text,
    catch_up_window   interval,
    catch_up_limit    integer,
    skip_if_running   boolean,
    next_fire_at      timestamptz,
    last_slot         timestamptz,
    fired             bigint,
    skipped           bigint,
    missed            bigint,
    last_skipped_slot timestamptz,
    last_missed_at    timestamptz,
    created_at        timestamptz,
    updated_at        timestamptz,
    last_job_id       bigint,
    last_job_slot     timestamptz,
    overdue           boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
BEGIN
    p_now := backoff._now(p_now);
    RETURN QUERY
    SELECT s.name, s.queue, s.payload, s.cron, s.every, s.anchor, s.time_zone, s.policy, s.priority,
           s.max_attempts, s.paused, s.catch_up, s.catch_up_window, s.catch_up_limit, s.skip_if_running,
           s.next_fire_at, s.last_slot, s.fired, s.skipped, s.missed, s.last_skipped_slot, s.last_missed_at,
           s.created_at, s.updated_at, l.id, l.schedule_slot,
           NOT s.paused AND s.next_fire_at IS NOT NULL
           AND p_now > coalesce(backoff._next_fire(s, s.next_fire_at), s.next_fire_at)
    FROM backoff.schedules AS s
    LEFT JOIN LATERAL (SELECT j.id, j.schedule_slot FROM backoff.jobs AS j
                       WHERE j.schedule = s.name AND j.schedule_slot IS NOT NULL
                       ORDER BY j.schedule_slot DESC LIMIT 1) AS l ON true
    WHERE p_name IS NULL OR s.name = p_name
    ORDER BY s.name;
END
$$;

COMMENT ON FUNCTION backoff.schedule_list(text, timestamptz) IS
'Every stored schedule, or the one named p_name (NULL: all; no row for a name no schedule has in this database), by name: the settings put_schedule wrote (cron or every with its anchor, time_zone, the job''s queue, payload, policy, priority and max_attempts, the missed-slot policy) and the state fire_schedules keeps (paused, next_fire_at: NULL when the expression has no later time, last_slot, the counters fired, skipped (slots passed over by skip_if_running) and missed (slots passed over by catch_up ''latest'' or catch_up_window, see backoff.fire_schedules), last_skipped_slot, last_missed_at), then last_job_id and last_job_slot: the job of the latest slot fired (NULL: none yet, or pruned; a manual fire by backoff.trigger_schedule has no slot and is not counted here), and overdue: at p_now (default now) the schedule is not paused and its next fire time is past by more than its firing interval (the time from that slot to the one after it; past at all when there is none after it), i.e. nothing has called fire_schedules for its queue for a whole interval. Admin only.
Errors: 22023 for a p_now that is infinite or outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-27 12:00+00'');
SELECT count(*) FROM backoff.fire_schedules(p_now => ''2026-03-28 02:00+00'');
SELECT name, queue, cron, next_fire_at, last_slot, fired, missed, last_job_slot, overdue FROM backoff.schedule_list(p_now => ''2026-03-28 02:00+00'');';

-- backoff.fire_schedules(limit, now): enqueue one job for every slot due at
-- p_now and advance each schedule past it (docs/adr/0063, docs/adr/0076).
-- Any number of callers may run it at any moment, with no leader and with
-- clocks that differ by up to backoff.settings.max_clock_skew: a due
-- schedule's row is locked FOR UPDATE, waiting for a caller that holds it,
-- in the order of the schedules' names (so two callers never wait for each
-- other in a cycle), and once the holder committed the waiter sees its
-- next fire time and fires what is still due on its own clock. The next
-- fire time moves past the slots handled before the lock is released, so a
-- slot is enqueued once; a job records its schedule and slot, and each
-- partition's unique index on the two refuses a second insert of a slot
-- there (an index cannot span the partitions of backoff.jobs,
-- docs/adr/0061). Under REPEATABLE READ or SERIALIZABLE a row another
-- caller changed meanwhile raises 40001 (the clients retry).
-- catch_up 'latest' passes a slot over (and counts it in missed) only when
-- its interval ended max_clock_skew or more before p_now: a slot that may
-- still be the current one on another caller's clock fires. The window
-- passes over (and counts) the slots older than it.
-- With nothing due it is one probe of schedules_due_idx, so a worker can
-- call it in its loop. The jobs are inserted by one set-based INSERT with
-- enqueue's policy rule (backoff._governing_policy) and its wake-ups (a
-- NOTIFY per queue with a waiting worker). A caller scoped by
-- backoff.grant_queue fires only the schedules of queues it may work on or
-- produce into, and one without any grant (require_queue_grants) none,
-- as backoff._queue_scope decides everywhere; what it enqueues was written
-- by an admin. A caller outside backoff_admin fires at most 1000 jobs per
-- call, whatever p_limit says.
CREATE OR REPLACE FUNCTION backoff.fire_schedules(
    p_limit integer DEFAULT 1000,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (schedule text, slot timestamptz, job_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_scope        text[];
    v_s            backoff.schedules;
    v_left         integer;
    v_names        text[] := '{}';
    v_slots        timestamptz[] := '{}';
    v_queues       text[] := '{}';
    v_from         timestamptz;
    v_keep         timestamptz;
    v_tail         timestamptz[];
    v_slot         timestamptz;
    v_next         timestamptz;
    v_skew         interval;
    v_running      boolean;
    v_missed       bigint;
    v_fired        integer;
    v_skipped      integer;
    v_last_skipped timestamptz;
BEGIN
    p_now := backoff._now(p_now);
    -- That a firer ran, for backoff.liveness (at most a write every 15 s).
    PERFORM backoff._note_maintenance('fire_schedules', NULL, p_now);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 100000, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_left := p_limit;
    -- A worker's call stays short: at most 1000 jobs (about a third of a
    -- second); the rest fire at its next call.
    IF v_left > 1000 AND NOT pg_catalog.pg_has_role(
            coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user::text), 'backoff_admin', 'MEMBER') THEN
        v_left := 1000;
    END IF;
    -- NULL for an unscoped caller (both are NULL then); empty for a caller
    -- without any grant while grants are required (docs/adr/0058).
    v_scope := backoff._queue_scope('work') || backoff._queue_scope('produce');
    FOR v_s IN
        SELECT *
        FROM backoff.schedules AS s
        WHERE NOT s.paused AND s.next_fire_at <= p_now
          AND (v_scope IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
        ORDER BY s.name
        LIMIT v_left
        FOR UPDATE
    LOOP
        EXIT WHEN v_left <= 0;
        v_from := v_s.next_fire_at;
        v_missed := 0;
        v_fired := 0;
        v_skipped := 0;
        v_last_skipped := NULL;
        v_slot := NULL;
        -- Slots older than the catch-up window are passed over.
        IF v_s.catch_up_window IS NOT NULL AND v_from < p_now - v_s.catch_up_window THEN
            v_next := backoff._next_fire(v_s, p_now - v_s.catch_up_window - interval '1 microsecond');
            v_missed := backoff._count_fires(v_s, v_from, p_now - v_s.catch_up_window);
            v_from := v_next;
        END IF;
        -- 'latest': the slots whose interval ended max_clock_skew or more
        -- before p_now are passed over; the others fire, the latest always:
        -- from the slot whose interval holds p_now - max_clock_skew on, at
        -- most catch_up_limit of them (the latest).
        IF v_s.catch_up = 'latest' AND v_from <= p_now THEN
            IF v_skew IS NULL THEN
                SELECT st.max_clock_skew INTO v_skew FROM backoff.settings AS st;
                v_skew := coalesce(v_skew, interval '5 minutes');
            END IF;
            v_keep := v_from;
            IF v_from <= p_now - v_skew THEN
                v_keep := backoff._latest_fire(v_s, v_from, p_now - v_skew);
            END IF;
            -- At most catch_up_limit of them, the latest ones.
            v_slot := backoff._latest_fire(v_s, v_keep, p_now);
            IF v_s.every IS NOT NULL THEN
                v_keep := greatest(v_keep, v_slot - (v_s.catch_up_limit - 1) * v_s.every);
            ELSE
                -- A cron slot is a minute or more after the one before:
                -- max_clock_skew in minutes at most (5 by default).
                v_tail := ARRAY[v_keep];
                WHILE v_tail[pg_catalog.cardinality(v_tail)] < v_slot LOOP
                    v_tail := v_tail || backoff._next_fire(v_s, v_tail[pg_catalog.cardinality(v_tail)]);
                END LOOP;
                v_keep := v_tail[greatest(1, pg_catalog.cardinality(v_tail) - v_s.catch_up_limit + 1)];
            END IF;
            v_missed := v_missed + backoff._count_fires(v_s, v_from, v_keep);
            -- With skip_if_running one of them could run: the latest; the
            -- ones before it are skipped.
            IF v_s.skip_if_running AND v_keep < v_slot THEN
                v_skipped := backoff._count_fires(v_s, v_keep, v_slot);
                v_last_skipped := backoff._latest_fire(v_s, v_keep, v_slot - interval '1 microsecond');
                v_keep := v_slot;
            END IF;
            v_from := v_keep;
            v_slot := NULL;
        END IF;
        IF v_from IS NULL OR v_from > p_now THEN
            v_next := v_from;
        ELSE
            -- Each slot in turn, oldest first, at most catch_up_limit per
            -- call and p_limit in all; the next call goes on from v_next.
            v_running := v_s.skip_if_running
                         AND EXISTS (SELECT FROM backoff.jobs AS j
                                     WHERE j.schedule = v_s.name AND j.status IN ('pending', 'running', 'retrying', 'blocked'));
            v_slot := v_from;
            LOOP
                IF v_running THEN
                    v_skipped := v_skipped + 1;
                    v_last_skipped := greatest(v_last_skipped, v_slot);
                ELSE
                    v_names := v_names || v_s.name;
                    v_slots := v_slots || v_slot;
                    v_fired := v_fired + 1;
                    v_running := v_s.skip_if_running;
                END IF;
                v_next := backoff._next_fire(v_s, v_slot);
                EXIT WHEN v_next IS NULL OR v_next > p_now
                          OR v_fired + v_skipped >= v_s.catch_up_limit OR v_fired >= v_left;
                v_slot := v_next;
            END LOOP;
        END IF;
        IF v_fired > 0 THEN
            v_queues := v_queues || v_s.queue;
        END IF;
        v_left := v_left - v_fired;
        UPDATE backoff.schedules AS s
        SET next_fire_at = v_next,
            last_slot = coalesce(v_slot, s.last_slot),
            fired = s.fired + v_fired,
            skipped = s.skipped + v_skipped,
            missed = s.missed + v_missed,
            last_skipped_slot = coalesce(v_last_skipped, s.last_skipped_slot),
            last_missed_at = CASE WHEN v_missed > 0 THEN p_now ELSE s.last_missed_at END
        WHERE s.name = v_s.name;
    END LOOP;

    IF pg_catalog.cardinality(v_names) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH ins AS (
        -- Into the current segment (docs/adr/0061). A unique index cannot
        -- span the partitions: each partition's on (schedule,
        -- schedule_slot) refuses a second job of a slot in that partition;
        -- across partitions the schedule's row lock, under which the slot
        -- fires and next_fire_at moves past it, is the guarantee.
        INSERT INTO backoff.jobs AS j (queue, payload, priority, max_attempts, policy, run_at, created_at,
                                       schedule, schedule_slot, segment)
        SELECT s.queue, s.payload, s.priority, s.max_attempts, g.name, f.at, p_now, s.name, f.at,
               backoff._current_segment()
        FROM unnest(v_names, v_slots) WITH ORDINALITY AS f(name, at, ord)
        JOIN backoff.schedules AS s ON s.name = f.name
        CROSS JOIN LATERAL backoff._governing_policy(s.policy, s.queue) AS g
        ORDER BY f.ord
        ON CONFLICT DO NOTHING
        RETURNING j.schedule, j.schedule_slot, j.id
    )
    SELECT ins.schedule, ins.schedule_slot, ins.id FROM ins ORDER BY ins.schedule_slot, ins.id;

    -- Every slot fired is due: wake the workers waiting for its queue.
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_queues) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;

COMMENT ON FUNCTION backoff.fire_schedules(integer, timestamptz) IS
'Fire every schedule due at p_now: for each slot due, enqueue one job (the schedule''s queue, payload, policy, priority and max attempts; run_at is the slot; backoff.jobs.schedule and schedule_slot name them) and advance the schedule past it. Returns one row per job enqueued: the schedule, the slot, the job id. Call it from any number of workers, cron jobs or pg_cron at any time, on clocks that differ by up to backoff.settings.max_clock_skew: a slot is enqueued once, whoever calls and however often, and every slot fires while some caller calls within its interval (a due schedule is locked, waiting for a caller that holds it, in name order, and moved past the slots it fires before the lock is released; under REPEATABLE READ or SERIALIZABLE a schedule another caller fired meanwhile raises 40001: retry). With nothing due it costs one index probe. Missed slots follow the schedule''s catch_up: ''latest'' fires the latest slot due and every earlier one whose interval ended less than max_clock_skew before p_now (it may still be the current slot on another caller''s clock), oldest first (with skip_if_running only the latest: the others are skipped), and passes over the older ones; ''all'' fires each; either at most catch_up_limit per schedule per call. catch_up_window passes over the slots older than it. Every slot passed over is counted in the schedule''s missed (last_missed_at: the p_now that passed some over). A p_now before a schedule''s next fire time fires nothing of it, so a clock that goes back repeats nothing. A schedule with skip_if_running and an unfinished job skips its slot (counted in skipped, last_skipped_slot). At most p_limit (1 to 100000, default 1000) jobs per call, and at most 1000 for a caller outside backoff_admin; the rest fire at the next call. Paused schedules fire nothing. A caller scoped by backoff.grant_queue fires only the schedules of the queues it may work on or produce into; one without any grant while backoff.settings.require_queue_grants is on fires none. Notifies channel backoff_jobs once per queue with a waiting worker (backoff.wait_for_jobs).
Errors: 22023 for a limit outside 1-100000, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.put_schedule(''heartbeat'', ''pings'', p_every => ''5 minutes'', p_now => ''2026-01-01 00:00+00'');
SELECT backoff.put_schedule(''sweep'', ''pings'', p_every => ''5 minutes'', p_catch_up => ''all'', p_now => ''2026-01-01 00:00+00'');
SELECT schedule, slot FROM backoff.fire_schedules(p_now => ''2026-01-01 00:12+00'');';

-- backoff.maintain(limit, for, every, fire_schedules): the maintenance a
-- Worker runs (reap and rotate, and fire_schedules when asked), at the
-- Worker's cadence, for a deployment without one (docs/adr/0081).
-- Rotation must switch segments within seconds for a held snapshot not to
-- slow the claims, and pg_cron's finest schedule is a minute before
-- pg_cron 1.5: one call runs a round every p_every for p_for, so a pg_cron
-- job every minute (backoffctl cron install) keeps a cadence of a second.
-- Each round is a READ COMMITTED transaction of its own, whatever the
-- database's default, since rotate truncates only there (docs/adr/0078),
-- and a round's work is committed before the next begins.
--
-- A procedure, since only a procedure may COMMIT between rounds; and so
-- SECURITY INVOKER without SET clauses, which PostgreSQL requires of a
-- procedure that commits: it calls the public functions, which check the
-- caller as any call does, and qualifies every name and operator.
CREATE OR REPLACE PROCEDURE backoff.maintain(
    p_limit          integer  DEFAULT 1000,
    p_for            interval DEFAULT interval '55 seconds',
    p_every          interval DEFAULT interval '1 second',
    p_fire_schedules boolean  DEFAULT false
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_until timestamptz;
BEGIN
    IF p_for IS NULL OR p_for OPERATOR(pg_catalog.<) interval '0'
       OR p_for OPERATOR(pg_catalog.>) interval '1 hour' THEN
        RAISE EXCEPTION 'maintain: p_for must be between 0 and 1 hour, got "%"', coalesce(p_for::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_every IS NULL OR p_every OPERATOR(pg_catalog.<) interval '10 milliseconds'
       OR p_every OPERATOR(pg_catalog.>) interval '1 minute' THEN
        RAISE EXCEPTION 'maintain: p_every must be between 10 milliseconds and 1 minute, got "%"', coalesce(p_every::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_until := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) p_for;
    LOOP
        -- Ends the caller's transaction (or the previous sleep's), so that
        -- the round starts one of its own at the level it needs.
        COMMIT;
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        PERFORM backoff.reap(p_limit => p_limit);
        PERFORM backoff.rotate();
        IF p_fire_schedules THEN
            PERFORM FROM backoff.fire_schedules(p_limit => p_limit);
        END IF;
        COMMIT;
        EXIT WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) p_every OPERATOR(pg_catalog.>) v_until;
        PERFORM pg_catalog.pg_sleep_for(p_every);
    END LOOP;
END
$$;

COMMENT ON PROCEDURE backoff.maintain(integer, interval, interval, boolean) IS
'Run the maintenance a Worker runs, at its cadence, where no Worker runs: every p_every (10 ms to 1 minute, default 1 second) for p_for (0 to 1 hour, default 55 seconds), reap expired leases (at most p_limit a round), rotate the job segments and, with p_fire_schedules, fire the schedules due (at most p_limit jobs a round). Each round is a READ COMMITTED transaction of its own, committed before the next, whatever the database''s default isolation (rotate truncates only at READ COMMITTED). A procedure: CALL it outside a transaction block (a pg_cron job does; backoffctl cron install schedules CALL backoff.maintain() every minute). p_for 0 runs one round. The caller needs EXECUTE on reap, rotate and fire_schedules, as backoff_worker and backoff_admin have.
Errors: 22023 for p_for or p_every outside their ranges (and as reap, rotate and fire_schedules raise it); 2D000 when called inside a transaction block.
Example:
CALL backoff.maintain(p_for => ''0 seconds'');';

-- backoff.trigger_schedule(name, now): enqueue one job of the schedule
-- p_name now, out of turn (docs/adr/0068). The job is the one a slot would
-- enqueue (queue, payload, policy rule, priority, max attempts) and names
-- the schedule with no slot: a manual fire. The schedule is not moved (its
-- next fire time, last slot and counters stay), a pause does not stop it
-- (an operator may run a paused schedule by hand), and the unique index on
-- (schedule, schedule_slot) lets any number of manual fires coexist with
-- the slots. A set of at most one row, so that behind a router every shard
-- is asked and only the one that holds the schedule answers. Admin only.
CREATE OR REPLACE FUNCTION backoff.trigger_schedule(p_name text, p_now timestamptz DEFAULT now())
RETURNS TABLE (schedule text, job_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    p_now := backoff._now(p_now);
    RETURN QUERY
    -- Into the current segment, as every enqueue (docs/adr/0061).
    INSERT INTO backoff.jobs AS j (queue, payload, priority, max_attempts, policy, run_at, created_at,
                                   schedule, schedule_slot, segment)
    SELECT s.queue, s.payload, s.priority, s.max_attempts, g.name, p_now, p_now, s.name, NULL,
           backoff._current_segment()
    FROM backoff.schedules AS s
    CROSS JOIN LATERAL backoff._governing_policy(s.policy, s.queue) AS g
    WHERE s.name = p_name
    RETURNING j.schedule, j.id;
    IF FOUND THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
        FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
              JOIN backoff.schedules AS s ON s.queue = w.queue
              WHERE s.name = p_name AND w.expires_at > pg_catalog.now()) AS w;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.trigger_schedule(text, timestamptz) IS
'Enqueue one job of the schedule p_name now, out of turn: the job a slot would enqueue (the schedule''s queue, payload, policy, priority and max attempts), due at p_now, with backoff.jobs.schedule naming the schedule and schedule_slot NULL (a manual fire). The schedule itself is not moved: its next fire time, last slot and counters stay, and the next slot still fires. A paused schedule can be triggered. Returns the schedule and the new job''s id, or no row when no schedule has that name in this database. Notifies channel backoff_jobs when a worker waits for the queue. Admin only.
Errors: 22023 for a p_now that is infinite or outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_now => ''2026-01-01 00:00+00'');
SELECT schedule, job_id > 0 AS enqueued FROM backoff.trigger_schedule(''nightly-report'', p_now => ''2026-01-01 09:15+00'');';

-- Privileges of the functions (and the procedure, backoff.maintain)
-- installed with this file (docs/adr/0017, docs/adr/0038): owner
-- backoff_owner, nothing for PUBLIC, EXECUTE granted by name so that every
-- overload is covered. It runs last in install.sql,
-- so a snapshot carries the grants that go with its functions.
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
        EXECUTE pg_catalog.format('ALTER ROUTINE %s OWNER TO backoff_owner', v_fn.sig);
        EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', v_fn.sig);
        FOREACH v_role IN ARRAY ARRAY['backoff_producer', 'backoff_worker', 'backoff_admin'] LOOP
            IF v_fn.name = 'schema_version'
               OR (v_role = 'backoff_producer' AND v_fn.name IN ('enqueue', 'enqueue_graph', 'queue_state', 'unfinished_job', 'job_output',
                                                                 'await_job', 'stop_awaiting'))
               OR (v_role = 'backoff_worker' AND v_fn.name IN (
                       'claim', 'acquire', 'complete', 'complete_many', 'fail', 'heartbeat', 'snooze', 'reap', 'rotate', 'maintain',
                       'retry_delay', 'compute_delay', 'schedule', 'calculate_step_next_retry_time', 'job_policy',
                       'wait_for_jobs', 'stop_waiting', 'next_work', 'error_signature', 'queue_state', 'job', 'unfinished_job', 'queue_list',
                       'fire_schedules', 'schedule_fires', 'policy_list', 'job_output', 'parent_outputs', 'await_job', 'stop_awaiting',
                       -- private, for the row-level security policy of backoff.jobs
                       '_visible_queues'))
               OR (v_role = 'backoff_admin' AND (v_fn.name NOT LIKE '\_%'
                                                 -- private, the DEFAULT of backoff.jobs.segment
                                                 OR v_fn.name = '_current_segment')) THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON ROUTINE %s TO %I', v_fn.sig, v_role);
            END IF;
        END LOOP;
    END LOOP;
END
$$;



-- == Live jobs in rotating segments: the default segment (docs/adr/0061) ==
-- Here, after the functions: the default calls one. ONLY: an INSERT through
-- backoff.jobs takes the parent's default; the finished partition keeps its
-- own 0, which the undo below relies on once the DROP FUNCTION ... CASCADE
-- there has dropped this default with the function.
ALTER TABLE ONLY backoff.jobs ALTER COLUMN segment SET DEFAULT backoff._current_segment();
